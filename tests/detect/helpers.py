"""Build detector input the real way: RawCall -> fingerprint_call -> Run.observe.

Every test in this folder goes through `Fingerprinter` and `Run`, never through
hand-made ToolCalls, so a change in fingerprinting or progress judgement shows
up here too.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from otel_loopguard.calls import ModelCall, RawCall, ToolCall
from otel_loopguard.detect import Run
from otel_loopguard.findings import Finding
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
from otel_loopguard.policy import Policy, policy_from_mapping
from otel_loopguard.progress import Judgement

KEY = load_key(key=b"k" * 32)
RUN_ID = "run-test"
SEC = 1_000_000_000
T0 = 1_700_000_000 * SEC  # a realistic epoch start, in ns

# No budgets: most detector tests must not see budget findings on long inputs.
NO_BUDGETS = {"max_turns": None, "max_tool_calls": None, "max_seconds": None}

Step = Union[tuple, Mapping[str, Any]]


def policy(mapping: Optional[Mapping[str, Any]] = None) -> Policy:
    return policy_from_mapping(dict(mapping or {}))


def span_id(seq: int) -> str:
    return f"{seq:016x}"


class Harness:
    """One run: feed calls one by one, keep every finding and the call it came on."""

    def __init__(self, pol: Union[Policy, Mapping[str, Any], None] = None, run_id: str = RUN_ID):
        self.policy = pol if isinstance(pol, Policy) else policy(pol)
        self.fp = Fingerprinter(KEY, self.policy)
        self.run = Run(run_id, self.policy)
        self.seq = 0
        self.calls: list[ToolCall] = []
        self.judgements: list[Judgement] = []
        self.findings: list[Finding] = []
        self.at: list[int] = []  # seq of the call whose observe() returned each finding

    def fingerprint(self, tool: str, args: Any = None, result: Any = None, **raw: Any) -> ToolCall:
        seq = raw.pop("seq", self.seq + 1)
        raw.setdefault("span_id", span_id(seq))
        return fingerprint_call(RawCall(seq=seq, tool=tool, arguments=args, result=result, **raw), self.fp)

    def call(
        self,
        tool: str,
        args: Any = None,
        result: Any = None,
        turn: Optional[int] = None,
        ok: Optional[bool] = True,
        **raw: Any,
    ) -> list[Finding]:
        """Feed one call (seq defaults to the next number); returns its findings."""
        tc = self.fingerprint(tool, args, result, turn=turn, ok=ok, **raw)
        found, judgement = self.run.observe_judged(tc)
        self.seq = tc.seq
        self.calls.append(tc)
        self.judgements.append(judgement)
        self.findings += found
        self.at += [tc.seq] * len(found)
        return found

    def model(self, turn: int, input_tokens: int = 0, output_tokens: int = 0, model: Optional[str] = None) -> list[Finding]:
        found = self.run.observe_model(ModelCall(turn=turn, input_tokens=input_tokens, output_tokens=output_tokens,
                                                  model=model))
        self.findings += found
        self.at += [self.seq] * len(found)
        return found

    def feed(self, steps: Iterable[Step]) -> list[Finding]:
        """Feed (tool, args, result, turn, ok) tuples (trailing items optional) or dicts."""
        out: list[Finding] = []
        for step in steps:
            if isinstance(step, Mapping):
                out += self.call(**step)
            else:
                out += self.call(*step)
        return out

    def kind(self, kind: str) -> list[Finding]:
        return of_kind(self.findings, kind)

    def kinds(self) -> set[str]:
        return {f.kind for f in self.findings}

    def fired_at(self, finding: Finding) -> int:
        for f, seq in zip(self.findings, self.at):
            if f is finding:
                return seq
        raise LookupError(finding)


def feed(steps: Iterable[Step], pol: Union[Policy, Mapping[str, Any], None] = None, run_id: str = RUN_ID) -> list[Finding]:
    """All findings of a fresh run fed with `steps`."""
    h = Harness(pol, run_id)
    h.feed(steps)
    return h.findings


def of_kind(findings: Sequence[Finding], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


def brief(f: Finding) -> tuple[str, str, int, int, int]:
    """(kind, severity, first_seq, last_seq, count)."""
    return (f.kind, f.severity, f.first_seq, f.last_seq, f.count)


def briefs(findings: Sequence[Finding], kind: Optional[str] = None) -> list[tuple[str, str, int, int, int]]:
    return [brief(f) for f in findings if kind is None or f.kind == kind]


def spans(*seqs: int) -> tuple[str, ...]:
    return tuple(span_id(s) for s in seqs)


# Loop-kind verdicts of a fed run (the equivalence, shell and result-sketch tests).
LOOP_KINDS = {"repeat", "cycle", "no_progress", "error_streak"}
UNBUDGETED = {"budget": NO_BUDGETS}


def run(steps: list[Step], pol: Optional[Mapping[str, Any]] = None) -> Harness:
    """A harness fed with the steps, under `pol` (default: no budgets)."""
    h = Harness(pol or UNBUDGETED)
    h.feed(steps)
    return h


def stop_at(h: Harness) -> Optional[int]:
    """Seq of the call whose observation brought the first loop-kind stop."""
    seqs = [seq for f, seq in zip(h.findings, h.at) if f.severity == "stop" and f.kind in LOOP_KINDS]
    return min(seqs) if seqs else None


def loud(h: Harness) -> list[tuple[str, str]]:
    """Loop-kind findings at warn or above."""
    return [(f.kind, f.severity) for f in h.findings if f.kind in LOOP_KINDS and f.severity in ("warn", "stop")]
