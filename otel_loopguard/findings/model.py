"""The Finding record every detector returns (pure; OTLP encoding lives apart)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Optional, Sequence

from ..calls import ToolCall

INFO, WARN, STOP = "info", "warn", "stop"
SEVERITY_RANK = {INFO: 0, WARN: 1, STOP: 2}

KINDS = (
    "repeat",
    "cycle",
    "error_streak",
    "no_progress",
    "budget",
    "tool_cap",
    "poll_budget",
    "duplicate_write",
    "parallel_duplicate",
    "incomplete_trace",
    "telemetry_duplicate",
    "integrity_conflict",
)
# Integrity kinds describe the telemetry, not the agent: they never stop a run.
INTEGRITY_KINDS = frozenset({"incomplete_trace", "telemetry_duplicate", "integrity_conflict"})
# Stops a guard can act on only at the next call: they fire on the call that reaches a limit
# (the last call allowed), or only that call's own outcome reveals them (errors, nothing new,
# a poll without a terminal state).
AT_NEXT_CALL_KINDS = frozenset({"budget", "tool_cap", "poll_budget", "error_streak", "no_progress"})
# Stops about one tool, not the run: a per-tool cap refuses that tool's later calls only and
# the run goes on with the others (seed 001's `before_call`).
TOOL_LEVEL_KINDS = frozenset({"tool_cap"})


@dataclass(frozen=True, kw_only=True)
class Finding:
    kind: str
    severity: str
    first_seq: int
    last_seq: int
    count: int
    seqs: tuple[int, ...]
    span_ids: tuple[Optional[str], ...]
    reason: str
    tool: Optional[str] = None
    action: Optional[str] = None
    run_id: str = ""
    policy_version: str = ""

    def stamped(self, run_id: str, policy_version: str) -> "Finding":
        return replace(self, run_id=run_id, policy_version=policy_version)

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "count": self.count,
            "tool": self.tool,
        }


def finding(
    kind: str,
    severity: str,
    calls: Sequence[ToolCall],
    reason: str,
    *,
    count: Optional[int] = None,
    tool: Optional[str] = None,
    action: Optional[str] = None,
) -> Finding:
    """A finding about `calls` (in sequence order); `count` defaults to len(calls)."""
    seqs = tuple(c.seq for c in calls)
    return Finding(
        kind=kind,
        severity=severity,
        first_seq=seqs[0] if seqs else 0,
        last_seq=seqs[-1] if seqs else 0,
        count=len(calls) if count is None else count,
        seqs=seqs,
        span_ids=tuple(c.span_id for c in calls),
        reason=reason,
        tool=tool,
        action=action,
    )


def worst(findings: Iterable[Finding]) -> Optional[str]:
    """The most severe level among findings: stop beats warn beats info."""
    best: Optional[str] = None
    for f in findings:
        if best is None or SEVERITY_RANK[f.severity] > SEVERITY_RANK[best]:
            best = f.severity
    return best
