"""Replay prepared runs under candidate policies: what blocking would do, per run (pure).

Each run is parsed, integrity-checked and fingerprinted once (score.prepare); only the
judging (detectors, guard trail, score, release rule) runs once per candidate. From a run's
findings under one candidate this module works out what an enforcing guard would have done:

- a run-level stop denies the call that crosses the threshold (repeat, cycle, a duplicate
  write), or, for a stop that fires on the call reaching a limit or that only the call's own
  outcome reveals, the next call (docs/guard.md); the turn budget lets the rest of its last
  turn run. Every later call of the run is denied too;
- a per-tool cap (`tool_cap`) denies that tool's later calls only;
- "saved": the calls that would not have run, the model tokens of later decisions (and their
  cost where the policy prices the model), the wall time from the denied call to the end.

Recorded `loopguard.decision` events (observe mode's `would_block`, enforce mode's `deny`) are
read the same way: the first one that blocks is where blocking stopped, or would have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..calls import RecordedDecision, ToolCall
from ..detect.budgets import is_turn_budget
from ..detect.run import stops_run
from ..findings import AT_NEXT_CALL_KINDS, INTEGRITY_KINDS, KINDS, STOP, TOOL_LEVEL_KINDS, WARN, Finding
from ..policy import Policy
from ..findings.waste import Waste
from ..score import SCORED, Prepared, RunReport, judge_prepared
from ..score.readout import run_waste_of

RUN_LEVEL = "*"  # the row of findings no single call caused (a budget reached by a model decision)
# What the agent did, not the telemetry: integrity findings never count as a warn or a stop.
_AGENT_KINDS = frozenset(KINDS) - INTEGRITY_KINDS
BLOCKING_VERBS = frozenset({"deny", "would_block"})
WARNING_VERBS = frozenset({"warn", "would_warn"})


@dataclass(frozen=True)
class Stop:
    """Where blocking stops a run (or one tool of it) and what that saves."""

    tool: str  # the tool whose call caused it, or RUN_LEVEL
    kind: str
    seq: Optional[int]  # the first call that would not run; None: nothing left to deny
    calls_saved: int = 0
    tokens_saved: int = 0
    cost_saved_usd: Optional[float] = None
    seconds_saved: Optional[float] = None


@dataclass(frozen=True)
class Replayed:
    """One run under one candidate."""

    run_id: str
    outcome: str
    passed: Optional[bool]
    findings: list[Finding]
    stop: Optional[Stop]  # the run-level stop, if blocking would deny a call
    caps: dict[str, Stop] = field(default_factory=dict)  # per-tool stops that deny a call
    warned: frozenset[str] = frozenset()  # tools (or RUN_LEVEL) with a warn-level finding
    waste: Optional[Waste] = None  # what the loops found under this policy cost (findings/waste.py)


def replay(prepared: Prepared, policy: Policy) -> Replayed:
    report = judge_prepared(prepared, policy)
    return outcome_of(prepared, report, policy)


def outcome_of(prepared: Prepared, report: RunReport, policy: Policy) -> Replayed:
    calls = prepared.calls
    tools = {c.seq: c.tool for c in calls}
    warned = frozenset(_tool_of(f, tools) for f in report.findings if f.severity == WARN and f.kind in _AGENT_KINDS)
    if report.outcome != SCORED:
        return Replayed(run_id=report.run_id, outcome=report.outcome, passed=report.passed, findings=report.findings,
                        stop=None, caps={}, warned=warned)
    stop = _run_stop(report.findings, calls, tools, prepared, policy)
    caps = _caps(report.findings, calls, stop)
    return Replayed(run_id=report.run_id, outcome=report.outcome, passed=report.passed, findings=report.findings,
                    stop=stop, caps=caps, warned=warned, waste=run_waste_of(report))


def _tool_of(f: Finding, tools: dict[int, str]) -> str:
    return f.tool or tools.get(f.last_seq) or RUN_LEVEL


def _denied_seq(f: Finding, calls: list[ToolCall], last_turn: Optional[int] = None) -> Optional[int]:
    """The first call an enforcing guard would not run because of `f`. `last_turn`: the last
    turn the turn budget allows (its calls all run; the next turn's first call is denied)."""
    if is_turn_budget(f) and last_turn is not None:
        return next((c.seq for c in calls if c.turn is not None and c.turn > last_turn), None)
    if f.kind in TOOL_LEVEL_KINDS:
        return next((c.seq for c in calls if c.seq > f.last_seq and c.tool == f.tool), None)
    if f.kind in AT_NEXT_CALL_KINDS or f.last_seq == 0:
        return next((c.seq for c in calls if c.seq > f.last_seq), None)
    return f.last_seq


def _run_stop(findings: list[Finding], calls: list[ToolCall], tools: dict[int, str], prepared: Prepared,
              policy: Policy) -> Optional[Stop]:
    best: Optional[tuple[int, Finding]] = None
    last_turn = _last_turn_allowed(prepared, policy)
    for f in findings:
        if not stops_run(f):
            continue
        seq = _denied_seq(f, calls, last_turn)
        if seq is not None and (best is None or seq < best[0]):
            best = (seq, f)
    if best is None:
        return None
    seq, f = best
    return saved_after(_tool_of(f, tools), f.kind, seq, prepared, policy)


def _last_turn_allowed(prepared: Prepared, policy: Policy) -> Optional[int]:
    """The turn that reaches `budget.max_turns` (turns are counted as the budget counts them:
    distinct turn numbers of model decisions and calls)."""
    limit = policy.budget.max_turns
    turns = sorted({m.turn for m in prepared.run.models} | {c.turn for c in prepared.calls if c.turn is not None})
    return turns[limit - 1] if limit is not None and len(turns) >= limit else None


def saved_after(tool: str, kind: str, seq: int, prepared: Prepared, policy: Policy) -> Stop:
    """What denying call `seq` and every later one saves."""
    calls = prepared.calls
    later = [c for c in calls if c.seq >= seq]
    denied_turn = later[0].turn if later else None
    tokens, cost = 0, 0.0
    priced = False
    for m in prepared.run.models:
        if denied_turn is not None and m.turn > denied_turn:
            tokens += m.input_tokens + m.output_tokens
            price = policy.price_for(m.model)
            if price is not None:
                priced = True
                cost += (m.input_tokens * price.input + m.output_tokens * price.output) / 1e6
    starts = [c.start_ns for c in later if c.start_ns]
    ends = [c.end_ns for c in calls if c.end_ns]
    seconds = (max(ends) - min(starts)) / 1e9 if starts and ends and max(ends) >= min(starts) else None
    return Stop(tool=tool, kind=kind, seq=seq, calls_saved=len(later), tokens_saved=tokens,
                cost_saved_usd=round(cost, 6) if priced else None, seconds_saved=seconds)


def _caps(findings: list[Finding], calls: list[ToolCall], stop: Optional[Stop]) -> dict[str, Stop]:
    """Per-tool caps that deny a call before the run-level stop (after it, nothing runs)."""
    end = stop.seq if stop is not None and stop.seq is not None else None
    out: dict[str, Stop] = {}
    for f in findings:
        if f.kind not in TOOL_LEVEL_KINDS or f.severity != STOP or f.tool is None or f.tool in out:
            continue
        seq = _denied_seq(f, calls)
        if seq is None or (end is not None and seq >= end):
            continue
        saved = sum(1 for c in calls if c.seq >= seq and c.tool == f.tool and (end is None or c.seq < end))
        out[f.tool] = Stop(tool=f.tool, kind=f.kind, seq=seq, calls_saved=saved)
    return out


def recorded(prepared: Prepared, policy: Policy) -> Replayed:
    """What the recorded decisions did, or say blocking would have done: the first blocking
    decision stops the run (a per-tool cap's stops its tool)."""
    decisions = list(prepared.run.decisions) or _from_records(prepared)
    calls = prepared.calls
    tools = {c.seq: c.tool for c in calls}
    warned = frozenset(d.tool or tools.get(d.seq or 0) or RUN_LEVEL for d in decisions if d.verb in WARNING_VERBS)
    blocking = sorted((d for d in decisions if d.verb in BLOCKING_VERBS and d.seq is not None),
                      key=lambda d: d.seq or 0)
    stop: Optional[Stop] = None
    caps: dict[str, Stop] = {}
    for d in blocking:
        tool = d.tool or tools.get(d.seq or 0) or RUN_LEVEL
        if d.kind in TOOL_LEVEL_KINDS:
            if tool not in caps and (stop is None or (stop.seq or 0) > (d.seq or 0)):
                saved = sum(1 for c in calls if c.seq >= (d.seq or 0) and c.tool == tool)
                caps[tool] = Stop(tool=tool, kind=d.kind or "tool_cap", seq=d.seq, calls_saved=saved)
        elif stop is None:
            stop = saved_after(tool, d.kind or "unknown", d.seq or 0, prepared, policy)
    # Counted only against calls that ran: a call enforce mode denied has no span to save.
    return Replayed(run_id=prepared.run.run_id, outcome=prepared.outcome, passed=None, findings=[], stop=stop,
                    caps=caps, warned=warned)


def _from_records(prepared: Prepared) -> list[RecordedDecision]:
    """NDJSON records carry a guard decision as `guard` on the call (denied or not)."""
    return [RecordedDecision(verb="would_block" if r.dispatched else "deny", kind=r.guard, tool=r.tool, seq=r.seq)
            for r in prepared.records if r.guard]


def has_decisions(prepared: Prepared) -> bool:
    return bool(prepared.run.decisions) or any(r.guard for r in prepared.records)
