"""The wall-time budget (`budget.max_seconds`) enforced by the guard, on all three adapters
(issue 28, defect 1): tools that take 0.25 s each (on a fake clock shared by the guard and the
spans), distinct arguments, `max_seconds: 2`. The call whose end crosses `warn_ratio` (0.8, so
1.6 s) is nudged (call 7, ending at 1.75 s), the next ones too, the call whose end reaches the
limit (call 8, 2.0 s) is the last allowed, and the calls after it are denied: the calls the
processor marks `would_warn` and `would_block`."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from .rollout_harness import FakeClock, drive, same_answer  # noqa: E402,F401

POLICY = "version: wall-1\nbudget: {max_seconds: 2, max_turns: null, max_tool_calls: null}\n"
MIXED = POLICY + "tools:\n  search_cases: {enforce: false}\n"


def _slow(clock: FakeClock, seconds: float = 0.25) -> Any:
    def behave(tool: str, args: dict) -> Any:
        clock.advance(seconds)
        return same_answer(tool, args)
    return behave


def _lookups(n: int) -> list:
    return [[("lookup_order", {"order_id": f"A{i}"})] for i in range(n)]


def test_the_guard_nudges_from_warn_ratio_and_denies_past_max_seconds(drive: Any) -> None:
    clock = FakeClock()
    out = drive(POLICY, _lookups(11), behave=_slow(clock), clock=clock)

    assert out.count("lookup_order") == 8  # call 8 ends at 2.0 s: the last allowed
    assert out.denied() == [9, 10, 11]
    assert out.nudged() == [7, 8]  # call 7 ends at 1.75 s (>= 1.6), call 8 starts past it
    assert "seconds of its budget of 2" in out.outputs[8]
    assert {d[1] for d in out.decisions} == {"budget"}


def test_the_guard_marks_the_calls_the_processor_marks(drive: Any) -> None:
    """Observe-only: every call runs, and the guard's would_warn / would_block fall on the
    calls the processor marks (its first of each)."""
    clock = FakeClock()
    out = drive(POLICY, _lookups(10), behave=_slow(clock), clock=clock, mode="observe")

    assert out.count("lookup_order") == 10 and out.denied() == [] and out.nudged() == []
    assert out.processor_marks("would_warn", "budget") == [7]
    assert out.processor_marks("would_block", "budget")[0] == 9
    assert min(out.guard_calls["would_warn"]) == 7
    assert min(out.guard_calls["would_block"]) == 9


def test_negative_control_fast_tools_are_never_nudged_or_denied(drive: Any) -> None:
    clock = FakeClock()
    out = drive(POLICY, _lookups(11), behave=_slow(clock, 0.1), clock=clock)  # 1.1 s in all

    assert out.count("lookup_order") == 11 and out.denied() == [] and out.nudged() == []
    assert out.decisions == []
