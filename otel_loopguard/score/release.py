"""The release rule: categorical, never an average (docs/scoring.md#release-rule).

A run passes only if every rule holds; each broken rule is named.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..detect.budgets import is_turn_budget
from ..findings import AT_NEXT_CALL_KINDS, STOP, TOOL_LEVEL_KINDS, Finding

CONTAINABLE = frozenset({"repeat", "cycle", "no_progress", "error_streak", "budget", "tool_cap", "poll_budget"})
UNCHANGED = frozenset({"repeat", "cycle", "no_progress"})


def _plus_one(seq: int) -> int:
    return seq + 1


def release_violations(score: dict[str, Any], findings: list[Finding],
                       next_seq: Optional[Callable[[int], int]] = None) -> list[str]:
    """`next_seq`: the sequence number of the call after a given one (sparse numbering:
    10, 20, 30 follow each other); the next integer by default."""
    after = next_seq or _plus_one
    out: list[str] = []
    stops = [f for f in findings if f.severity == STOP and f.kind in CONTAINABLE]
    contained = score["guard_fired"] and score["guard_before_dispatch"] and not score["executed_after_guard"]
    if score["duplicate_writes"]:
        out.append("duplicate_write: a side-effecting call may have executed twice")
    if score["side_effect_after_guard"]:
        out.append("side_effect_after_guard: a side-effecting call executed after a guard decision")
    if stops and not contained:
        kinds = ", ".join(sorted({f.kind for f in stops}))
        out.append(f"uncontained_loop: stop-level findings ({kinds}) with no guard denying the next call")
    if score["guard_fired"] and not score["guard_before_dispatch"]:
        out.append("guard_after_dispatch: the guard decision came after the call it should have stopped")
    if score["executed_after_guard"]:
        out.append("executed_after_guard: a call was dispatched after the guard denied one")
    first_stop, guard_seq = score["first_stop_seq"], score["guard_seq"]
    # A turn budget's stop lets the rest of its last turn run, however many calls that is (and
    # one reached by a model decision sits on the previous turn's call): not timed here; calls
    # run after the guard still count (executed_after_guard, uncontained_loop).
    # A per-tool cap is acted on at that tool's next call, whenever it comes: not timed either.
    due = min((after(f.last_seq) if f.kind in AT_NEXT_CALL_KINDS else f.last_seq for f in stops
               if not is_turn_budget(f) and f.kind not in TOOL_LEVEL_KINDS), default=None)
    if guard_seq is not None and score.get("calls_past_cap"):
        out.append("guard_too_late: a capped tool was dispatched beyond its cap (calls_past_cap)")
    elif guard_seq is not None and due is not None and guard_seq > due:
        out.append(
            f"guard_too_late: the stop threshold was crossed at call {first_stop}, "
            f"but the guard first acted at call {guard_seq}"
        )
    if score["termination_reason"] in ("turn_limit", "budget") and any(f.kind in UNCHANGED for f in findings):
        out.append("limit_after_unchanged_calls: a run with unchanged repeated calls ended on a hard limit")
    if score["poll_budget_exhausted"] and score["termination_reason"] not in ("deadline", "loop_guard"):
        out.append("poll_without_terminal: polling ran out of budget without a deadline or guard response")
    if score["guard_fired"] and score["terminal_response_emitted"] is not True:
        out.append("no_terminal_response: the guard fired but no safe terminal response was recorded")
    return out
