"""All candidates over all runs, summed up per tool (pure).

The runs are prepared once (parse, integrity, fingerprints: score.prepare), then judged once
per candidate. Per candidate and tool: the runs that would warn, the runs blocking would stop
(and at which call), what that saves, and the runs whose stop or verdict differs from the
current policy's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Optional

from ..policy import Policy
from ..score import Prepared
from .replay import RUN_LEVEL, Replayed, Stop, has_decisions, recorded, replay
from .sweep import CURRENT, Candidate

RECORDED = "recorded"


@dataclass
class ToolRow:
    tool: str
    warn_runs: list[str] = field(default_factory=list)
    stops: list[tuple[str, Stop]] = field(default_factory=list)  # (run id, where and what)
    newly_stopped: list[str] = field(default_factory=list)  # stopped here, not under current
    no_longer_stopped: list[str] = field(default_factory=list)  # stopped under current, not here

    def saved(self, name: str) -> float:
        return sum(getattr(s, name) or 0 for _, s in self.stops)

    def priced(self) -> Optional[float]:
        costs = [s.cost_saved_usd for _, s in self.stops if s.cost_saved_usd is not None]
        return round(sum(costs), 6) if costs else None


@dataclass
class Result:
    """One candidate (or the recorded decisions) over every run."""

    name: str
    key: Optional[str]
    value: object
    policy_version: Optional[str]
    note: str
    runs: list[Replayed]
    tools: dict[str, ToolRow]
    to_fail: list[str] = field(default_factory=list)  # release verdict pass -> fail against current
    to_pass: list[str] = field(default_factory=list)


@dataclass
class Calibration:
    prepared: list[Prepared]
    results: list[Result]  # current first, then the candidates in sweep order
    recorded: Optional[Result]  # the runs' own decision events, when any run has some

    @property
    def tools(self) -> list[str]:
        """Every tool called in the runs, then RUN_LEVEL if a stop or warn landed there."""
        seen = dict.fromkeys(c.tool for p in self.prepared for c in p.calls)
        for r in self.all_results():
            for t in r.tools:
                seen.setdefault(t)
        names = sorted(t for t in seen if t != RUN_LEVEL)
        return names + ([RUN_LEVEL] if RUN_LEVEL in seen else [])

    def all_results(self) -> list[Result]:
        return ([self.recorded] if self.recorded else []) + self.results


def calibrate(prepared: list[Prepared], candidates: list[Candidate], base: Policy) -> Calibration:
    """Judge every prepared run under every candidate (the first must be `current`)."""
    assert candidates and candidates[0].name == CURRENT
    results: list[Result] = []
    now = [replay(p, base_of(candidates)) for p in prepared]
    called = [_tools(p) for p in prepared]
    for cand in candidates:
        runs = now if cand.name == CURRENT else [_replay(p, cand, before, tools)
                                                 for p, before, tools in zip(prepared, now, called)]
        results.append(_result(cand.name, cand.key, cand.value, cand.policy.version, cand.note, runs))
    current = results[0]
    for r in results:
        _compare(r, current)
    rec = None
    if any(has_decisions(p) for p in prepared):
        runs = [recorded(p, base) for p in prepared]
        rec = _result(RECORDED, None, None, None, "from loopguard.decision events", runs)
        _compare(rec, current, verdicts=False)
    return Calibration(prepared=prepared, results=results, recorded=rec)


def base_of(candidates: list[Candidate]) -> Policy:
    return candidates[0].policy


def _replay(prepared: Prepared, cand: Candidate, current: Replayed, tools: set[str]) -> Replayed:
    """A candidate that changes one tool's rule judges a run that never calls that tool (and
    records no guard decision about it) as the current policy does: its judging is skipped,
    the current one's findings restamped with the candidate's version. tests/calibrate holds
    every candidate equal to a plain audit under that policy, skipped runs included."""
    if cand.tool is not None and cand.tool not in tools:
        version = cand.policy.version
        return replace(current, findings=[f.stamped(f.run_id, version) for f in current.findings])
    return replay(prepared, cand.policy)


def _tools(prepared: Prepared) -> set[str]:
    return {r.tool for r in prepared.records} | {e.tool or "" for e in prepared.run.guard_events}


def _result(name: str, key: Optional[str], value: object, version: Optional[str], note: str,
            runs: list[Replayed]) -> Result:
    tools: dict[str, ToolRow] = {}

    def row(tool: str) -> ToolRow:
        return tools.setdefault(tool, ToolRow(tool=tool))

    for run in runs:
        for tool in sorted(run.warned):
            row(tool).warn_runs.append(run.run_id)
        for stop in _stops(run):
            row(stop.tool).stops.append((run.run_id, stop))
    return Result(name=name, key=key, value=value, policy_version=version, note=note, runs=runs, tools=tools)


def _stops(run: Replayed) -> Iterable[Stop]:
    yield from run.caps.values()
    if run.stop is not None:
        yield run.stop


def _compare(result: Result, current: Result, verdicts: bool = True) -> None:
    by_tool_now = {t: {rid for rid, _ in row.stops} for t, row in current.tools.items()}
    for tool, row in result.tools.items():
        mine = {rid for rid, _ in row.stops}
        row.newly_stopped = sorted(mine - by_tool_now.get(tool, set()))
    for tool, theirs in by_tool_now.items():
        mine = {rid for rid, _ in result.tools[tool].stops} if tool in result.tools else set()
        gone = sorted(theirs - mine)
        if gone:
            result.tools.setdefault(tool, ToolRow(tool=tool)).no_longer_stopped = gone
    if verdicts:
        before = {r.run_id: r.passed for r in current.runs}
        result.to_fail = [r.run_id for r in result.runs if before.get(r.run_id) is True and r.passed is False]
        result.to_pass = [r.run_id for r in result.runs if before.get(r.run_id) is False and r.passed is True]
