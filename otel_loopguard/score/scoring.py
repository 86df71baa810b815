"""Judge a recorded run: integrity first, then detectors, then the score fields.

The score keeps separate facts instead of one number (docs/scoring.md): was a
threshold crossed, was there progress, did a guard fire and when, did anything
run after it, how did the run end and did the user get an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..calls import ModelCall, RawCall, RunFacts, ToolCall
from ..detect import Run
from ..findings import STOP, Finding
from ..fingerprint import Fingerprinter, fingerprint_call
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


@dataclass(frozen=True)
class RunReport:
    run_id: str
    outcome: str
    findings: list[Finding]
    calls: list[ToolCall]
    score: dict[str, Any]

    @property
    def passed(self) -> Optional[bool]:
        release = self.score.get("release")
        return None if release is None else bool(release["passed"])


def judge(run: RunInput, fp: Fingerprinter) -> RunReport:
    integrity = check(run.calls)
    executed = [c for c in integrity.calls if c.dispatched]
    calls = [fingerprint_call(c, fp) for c in executed]
    if integrity.outcome != SCORED:
        score = {"scorable": False, "release": None}
        return RunReport(run.run_id, integrity.outcome, _stamp(integrity.findings, run, fp), calls, score)
    tally = _Tally()
    detector_findings = _detect(run, calls, fp, tally)
    findings = _stamp(integrity.findings, run, fp) + detector_findings
    score = _score(run, integrity.calls, calls, findings, tally, fp)
    return RunReport(run.run_id, SCORED, findings, calls, score)


class _Tally:
    def __init__(self) -> None:
        self.progress = False
        self.new_items = False
        self.results: set[str] = set()


def _detect(run: RunInput, calls: list[ToolCall], fp: Fingerprinter, tally: _Tally) -> list[Finding]:
    state = Run(run.run_id, fp.policy)
    models = sorted(run.models, key=lambda m: m.turn)
    found: list[Finding] = []
    seen_actions: set[str] = set()
    m = 0
    for call in calls:
        # A decision's model call precedes the tool calls it requested.
        while m < len(models) and call.turn is not None and models[m].turn <= call.turn:
            found += state.observe_model(models[m])
            m += 1
        new, judgement = state.observe_judged(call)
        found += new
        tally.progress |= call.action in seen_actions and judgement.progressed
        tally.new_items |= judgement.new_items > 0
        seen_actions.add(call.action)
        if call.result is not None:
            tally.results.add(call.result)
    for model in models[m:]:
        found += state.observe_model(model)
    return found


def _stamp(findings: list[Finding], run: RunInput, fp: Fingerprinter) -> list[Finding]:
    return [f.stamped(run.run_id, fp.policy.version) for f in findings]


def _score(
    run: RunInput,
    records: list[RawCall],
    calls: list[ToolCall],
    findings: list[Finding],
    tally: _Tally,
    fp: Fingerprinter,
) -> dict[str, Any]:
    guarded = [r for r in records if r.guard is not None or not r.dispatched]
    guard = guarded[0] if guarded else None
    after = [r for r in records if guard is not None and r.seq > guard.seq and r.dispatched]
    stops = [f for f in findings if f.severity == STOP]
    kinds: dict[str, int] = {}
    for f in findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    score: dict[str, Any] = {
        "scorable": True,
        "tool_calls": len(calls),
        "distinct_action_count": len({c.action for c in calls}),
        "repeat_threshold_crossed": any(f.kind in LOOP_KINDS for f in stops)
        or (guard is not None and (guard.guard or "repeat") in LOOP_KINDS),
        "progress_observed": tally.progress,
        "new_items_observed": tally.new_items or len(tally.results) > 1,
        "guard_fired": guard is not None,
        "guard_seq": guard.seq if guard else None,
        "guard_before_dispatch": (not guard.dispatched) if guard else None,
        "executed_after_guard": bool(after),
        "side_effect_after_guard": any(fp.policy.rule(r.tool).side_effect for r in after),
        "first_stop_seq": min((f.last_seq for f in stops), default=None),
        "poll_budget_exhausted": any(f.kind == "poll_budget" for f in stops),
        "duplicate_writes": kinds.get("duplicate_write", 0),
        "termination_reason": run.facts.termination_reason,
        "terminal_response_emitted": run.facts.terminal_response,
        "findings_by_kind": kinds,
    }
    violations = release_violations(score, findings)
    score["release"] = {"passed": not violations, "violations": violations}
    return score
