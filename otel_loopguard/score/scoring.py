"""Judge a recorded run: integrity first, then detectors, then the score fields.

The score keeps separate facts instead of one number (docs/scoring.md): was a
threshold crossed, was there progress, did a guard fire and when, did anything
run after it, how did the run end and did the user get an answer.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, Sequence

from ..calls import LOCAL_KEY, GuardEvent, ModelCall, RawCall, RecordedDecision, RunFacts, ToolCall
from ..detect import Run, RunSummary
from ..findings import STOP, TOOL_LEVEL_KINDS, Finding
from ..fingerprint import Fingerprinter, fingerprint_call
from ..policy import Policy
from .integrity import SCORED, check
from .release import release_violations

LOOP_KINDS = frozenset({"repeat", "cycle", "no_progress"})


@dataclass(frozen=True)
class RunInput:
    """One run as a reader delivers it: calls in any order, maybe duplicated."""

    run_id: str
    calls: list[RawCall]
    models: list[ModelCall] = field(default_factory=list)
    facts: RunFacts = RunFacts()
    guard_events: list[GuardEvent] = field(default_factory=list)
    dense_seq: bool = False  # the source promised calls numbered 1..N: a gap is missing evidence
    # Every loopguard.decision event of the run, observe-mode marks included (calibrate reads them).
    decisions: list[RecordedDecision] = field(default_factory=list)


@dataclass(frozen=True)
class RunReport:
    run_id: str
    outcome: str
    findings: list[Finding]
    calls: list[ToolCall]
    score: dict[str, Any]
    # The run's unique records in sequence order, denied calls included (a timeline draws them).
    records: list[RawCall] = field(default_factory=list)
    # The run's model decisions and the policy that judged it: what the loops cost (readout.py).
    models: list[ModelCall] = field(default_factory=list)
    policy: Optional[Policy] = None

    @property
    def passed(self) -> Optional[bool]:
        release = self.score.get("release")
        return None if release is None else bool(release["passed"])


@dataclass
class GuardTrail:
    """Guard decisions and what ran after them, noted call by call in sequence order."""

    seq: Optional[float] = None  # x.5: a guard event in place of the call after call x
    kind: Optional[str] = None
    dispatched: Optional[bool] = None
    executed_after: int = 0
    side_effect_after: bool = False
    _run_stopped: bool = field(default=False, repr=False)  # a run-level decision was taken
    _capped: set[str] = field(default_factory=set, repr=False)  # tools refused by their cap
    past_cap: int = 0  # calls of a capped tool dispatched beyond its cap
    _counts: dict[str, int] = field(default_factory=dict, repr=False)  # dispatched calls of capped tools

    def note_event(self, position: float, kind: Optional[str], dispatched: bool, executed_after: int) -> None:
        """A guard decision known only by its time (a span event), counted against the
        calls that started after it. The earliest decision is the one the score reports.
        An event whose call was dispatched is an observe-mode record (`would_block`): what
        enforce mode would have done, not a decision of the guard (docs/scoring.md)."""
        if dispatched:
            return
        if self.seq is None or position < self.seq:
            self.seq, self.kind, self.dispatched = position, kind or "repeat", dispatched
        # A later run-level decision counts no more calls than the earliest; a cap's counts
        # only its tool's, so a run-level one after it may count more.
        self.executed_after = max(self.executed_after, executed_after)

    def note(self, seq: float, tool: str, dispatched: bool, guard: Optional[str], policy: Policy) -> None:
        decision = guard is not None or not dispatched
        cap = policy.rule(tool).max_calls
        if dispatched and cap is not None:
            # A cap's stop is acted on at that tool's next call, whenever it comes: one more run
            # is what tells a late guard (guard_too_late) apart from others running meanwhile.
            self._counts[tool] = count = self._counts.get(tool, 0) + 1
            self.past_cap += count > cap
        if self.seq is None:
            if decision:
                self.seq, self.kind, self.dispatched = seq, guard, dispatched
                self._scope(tool, guard)
            return
        if decision and not dispatched:
            self._scope(tool, guard)  # a later denial: it may widen what counts as run after it
            return
        # A per-tool cap refuses that tool only: other tools running after it are the run going on.
        if dispatched and seq > self.seq and (self._run_stopped or tool in self._capped):
            self.executed_after += 1
            self.side_effect_after |= policy.rule(tool).side_effect

    def _scope(self, tool: str, guard: Optional[str]) -> None:
        if guard in TOOL_LEVEL_KINDS:
            self._capped.add(tool)
        else:
            self._run_stopped = True


@dataclass(frozen=True)
class Prepared:
    """A run after the work that does not depend on thresholds: integrity checked, calls
    fingerprinted. Judging it under several policies that differ only in thresholds, budgets
    and caps (calibrate) costs one parse and one fingerprint pass in all."""

    run: RunInput
    outcome: str
    records: list[RawCall]  # unique, in sequence order, denied calls included
    calls: list[ToolCall]  # the dispatched ones, fingerprinted
    findings: list[Finding]  # integrity findings, not yet stamped


def prepare(run: RunInput, fp: Fingerprinter) -> Prepared:
    # Digests we compute ourselves carry our key id: they compare with spans tagged under it.
    own = [replace(c, key_id=fp.key_id) if c.key_id == LOCAL_KEY else c for c in run.calls]
    integrity = check(own, dense=run.dense_seq)
    calls = [fingerprint_call(c, fp) for c in integrity.calls if c.dispatched]
    return Prepared(run=run, outcome=integrity.outcome, records=integrity.calls, calls=calls, findings=integrity.findings)


def judge(run: RunInput, fp: Fingerprinter) -> RunReport:
    return judge_prepared(prepare(run, fp), fp.policy)


def judge_prepared(prepared: Prepared, policy: Policy) -> RunReport:
    """The verdict under `policy`, which must fingerprint as the one `prepared` was made with
    (only thresholds, budgets and caps may differ: calibrate/sweep.py checks it)."""
    run = prepared.run
    findings = [f.stamped(run.run_id, policy.version) for f in prepared.findings]
    if prepared.outcome != SCORED:
        return RunReport(run_id=run.run_id, outcome=prepared.outcome, findings=findings, calls=prepared.calls, score={"scorable": False, "release": None},
                         records=prepared.records, models=run.models, policy=policy)
    state = Run(run.run_id, policy)
    findings += feed_in_order(state, run.models, prepared.calls)
    trail = GuardTrail()
    for seq, tool, dispatched, guard in _guard_notes(prepared.records, run.guard_events):
        trail.note(seq, tool, dispatched, guard, policy)
    score = score_fields(state.summary, findings, trail, run.facts, next_seq_after([c.seq for c in prepared.records]))
    return RunReport(run_id=run.run_id, outcome=SCORED, findings=findings, calls=prepared.calls, score=score,
                     records=prepared.records, models=run.models, policy=policy)


def next_seq_after(seqs: list[int]) -> Callable[[int], int]:
    """The sequence number of the call after call `s` (sorted `seqs`): s + 1 only when the
    numbering is dense; after the last call, s + 1 stands for "the next one"."""
    def after(s: int) -> int:
        i = bisect.bisect_right(seqs, s)
        return seqs[i] if i < len(seqs) else s + 1

    return after


def _guard_notes(records: list[RawCall], events: list[GuardEvent]) -> list[tuple[float, str, bool, Optional[str]]]:
    """Records and guard events in run order. An event sits after the calls that started
    before it: position s + 0.5 is "in place of the call after call s", where s is the
    sequence number of the last of them (their count, when the numbering is dense). Events of
    calls that were dispatched (`would_block`, observe mode) are not guard decisions: left out."""
    notes: list[tuple[float, str, bool, Optional[str]]] = [(r.seq, r.tool, r.dispatched, r.guard) for r in records]
    seqs = sorted(r.seq for r in records)
    for e in events:
        if e.dispatched:
            continue
        before = sum(1 for r in records if r.start_ns is not None and r.start_ns <= e.time_ns)
        notes.append(((seqs[before - 1] if before else 0) + 0.5, e.tool or "", e.dispatched, e.kind or "repeat"))
    return sorted(notes, key=lambda n: n[0])


def feed_in_order(state: Run, models: list[ModelCall], calls: list[ToolCall]) -> list[Finding]:
    """Feed ordered calls, each decision's model call before the calls it requested."""
    ordered = sorted(models, key=lambda m: m.turn)
    found: list[Finding] = []
    m = 0
    for call in calls:
        while m < len(ordered) and call.turn is not None and ordered[m].turn <= call.turn:
            found += state.observe_model(ordered[m])
            m += 1
        found += state.observe(call)
    for model in ordered[m:]:
        found += state.observe_model(model)
    return found


def score_fields(summary: RunSummary, findings: Sequence[Finding], guard: GuardTrail, facts: RunFacts,
                 next_seq: Optional[Callable[[int], int]] = None) -> dict[str, Any]:
    """The score of a scorable run, from counts every shell keeps alike. `next_seq`: the
    number of the call after a given one (default: the next integer, dense numbering)."""
    fired = guard.seq is not None
    stops = [f for f in findings if f.severity == STOP]
    kinds: dict[str, int] = {}
    for f in findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    score: dict[str, Any] = {
        "scorable": True,
        "tool_calls": summary.tool_calls,
        "distinct_action_count": summary.distinct_actions,
        "repeat_threshold_crossed": any(f.kind in LOOP_KINDS for f in stops)
        or (fired and (guard.kind or "repeat") in LOOP_KINDS),
        "progress_observed": summary.progress_observed,
        "new_items_observed": summary.new_items_observed,
        "guard_fired": fired,
        "guard_seq": None if guard.seq is None else math.ceil(guard.seq),
        "guard_before_dispatch": (not guard.dispatched) if fired else None,
        "executed_after_guard": guard.executed_after > 0,
        "calls_past_cap": guard.past_cap,
        "side_effect_after_guard": guard.side_effect_after,
        "first_stop_seq": min((f.last_seq for f in stops), default=None),
        "poll_budget_exhausted": any(f.kind == "poll_budget" for f in stops),
        "duplicate_writes": kinds.get("duplicate_write", 0),
        "termination_reason": facts.termination_reason,
        "terminal_response_emitted": facts.terminal_response,
        "findings_by_kind": kinds,
    }
    violations = release_violations(score, list(findings), next_seq)
    score["release"] = {"passed": not violations, "violations": violations}
    return score
