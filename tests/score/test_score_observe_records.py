"""Observe-mode records are what enforce mode *would* have done: they never make a guard
decision in the score (docs/scoring.md: `guard_fired` is a denied call, or a call carrying
`guard`). A mixed rollout where nothing was denied carries `would_block` events on calls that
ran (`loopguard.dispatched=true`): those runs must not read as guarded."""

from __future__ import annotations

from otel_loopguard.calls import GuardEvent
from otel_loopguard.policy import policy_from_mapping
from otel_loopguard.score import RunInput
from otel_loopguard.score.scoring import GuardTrail, judge

from score_helpers import fingerprinter, raw

SEC = 1_000_000_000
T0 = 1_700_000_000 * SEC
NO_BUDGETS = {"max_turns": None, "max_tool_calls": None, "max_seconds": None}


def _calls(n: int) -> list:
    return [raw(s, "read", {"i": s}, {"row": s}, start_ns=T0 + s * SEC, end_ns=T0 + s * SEC + SEC // 2)
            for s in range(1, n + 1)]


def _score(events: list[GuardEvent], n: int = 8) -> dict:
    fp = fingerprinter(policy_from_mapping({"budget": NO_BUDGETS}))
    report = judge(RunInput("r", _calls(n), guard_events=events), fp)
    assert report.outcome == "scored"
    return report.score


def _would_block(after_seq: float, kind: str = "repeat") -> GuardEvent:
    """An observe-only decision: the call ran (dispatched), the guard only recorded it."""
    return GuardEvent(time_ns=T0 + int(after_seq * SEC), kind=kind, dispatched=True, tool="read")


def test_would_block_events_on_calls_that_ran_are_not_a_guard_decision() -> None:
    s = _score([_would_block(5.7), _would_block(6.7), _would_block(7.7)])
    assert s["guard_fired"] is False
    assert s["guard_seq"] is None and s["guard_before_dispatch"] is None
    assert s["executed_after_guard"] is False
    assert "executed_after_guard" not in s["release"]["violations"]
    assert "guard_after_dispatch" not in s["release"]["violations"]


def test_a_denial_among_would_block_events_is_the_guard_decision() -> None:
    """Negative control: the one real denial is what the score reports, not the marks before it."""
    denied = GuardEvent(time_ns=T0 + int(6.7 * SEC), kind="repeat", dispatched=False, tool="read")
    s = _score([_would_block(3.7), denied])
    assert (s["guard_fired"], s["guard_seq"], s["guard_before_dispatch"]) == (True, 7, True)
    assert s["executed_after_guard"] is True  # calls 7 and 8 ran after the denial


def test_the_receivers_trail_ignores_would_block_events_too() -> None:
    """The receiver notes span events straight into the trail (receiver/runs.py)."""
    trail = GuardTrail()
    trail.note_event(5.5, "repeat", True, 3)
    assert trail.seq is None and trail.executed_after == 0
    trail.note_event(6.5, "repeat", False, 2)
    assert (trail.seq, trail.dispatched, trail.executed_after) == (6.5, False, 2)
