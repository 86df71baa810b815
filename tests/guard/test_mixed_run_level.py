"""The guard's run-level rule in a mixed rollout, without a framework (issue 28, defect 5;
docs/rollout.md "Per-tool semantics"): streaks across tools stop the run for enforced tools
only on enforced calls in a row; budgets count every call."""

from __future__ import annotations

from typing import Any

from otel_loopguard.canon import load_key
from otel_loopguard.enforce import Guard
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import policy_from_mapping

KEY = load_key(key=b"mixed-run-level-key-8Jd3Xq5Wp1")
NO_BUDGETS = {"max_tool_calls": None, "max_turns": None, "max_seconds": None}
MIXED = {"search": {"enforce": False}}


def _guard(**rules: Any) -> Guard:
    data = {"version": "mixed-1", "budget": NO_BUDGETS, "tools": MIXED,
            "error_streak": {"warn_at": 3, "stop_at": 4}, "no_progress": {"warn_at": 3, "stop_at": 4},
            "cycle": {"warn_at": 2, "stop_at": 3}, **rules}
    return Guard(Fingerprinter(KEY, policy_from_mapping(data)))


def _drive(guard: Guard, calls: list[tuple[str, dict, Any, bool]]) -> list[str]:
    """Each call's decision verb, as the decorator would record it."""
    verbs = []
    for turn, (tool, args, result, ok) in enumerate(calls, start=1):
        d = guard.check(tool, args, run_id="r", turn=turn)
        verbs.append(d.action if d.enforced or d.action == "allow" else f"would_{'block' if d.action == 'deny' else 'warn'}")
        if not d.denied:
            guard.record(d, result, ok, run_id="r")
    return verbs


def _fail(tool: str, i: int) -> tuple[str, dict, Any, bool]:
    return (tool, {"i": i}, f"error {i}", False)


def test_an_error_streak_needs_enforced_failures_in_a_row() -> None:
    verbs = _drive(_guard(), [_fail("search", 1), _fail("search", 2), _fail("search", 3), _fail("lookup", 4),
                              _fail("lookup", 5)])
    assert "deny" not in verbs and verbs[4] == "would_block"
    verbs = _drive(_guard(), [_fail("lookup", i) for i in range(1, 6)])
    assert verbs[4] == "deny"  # negative control: four enforced failures stop the run


def test_an_observe_only_call_restarts_the_enforced_streak() -> None:
    verbs = _drive(_guard(), [_fail("lookup", 1), _fail("lookup", 2), _fail("search", 3), _fail("lookup", 4),
                              _fail("lookup", 5), _fail("lookup", 6), _fail("lookup", 7), _fail("lookup", 8)])
    # Every call counts toward would_block (four in a row at call 4); enforced failures in a
    # row are two, then four from call 4 to call 7: call 8 is denied.
    assert verbs[4:] == ["would_block", "would_block", "would_block", "deny"]


def test_no_progress_needs_enforced_calls_without_progress_in_a_row() -> None:
    same = [("search", {"q": q}, {"rows": []}, True) for q in "abcd"] + [("lookup", {"i": 1}, {"rows": []}, True),
                                                                          ("lookup", {"i": 2}, {"rows": []}, True)]
    assert "deny" not in _drive(_guard(), same)
    own = [("lookup", {"i": i}, {"rows": []}, True) for i in range(6)]
    assert _drive(_guard(), own)[5] == "deny"


def test_a_cycle_through_an_observe_only_tool_is_only_a_would_block() -> None:
    calls = [("search", {"q": "x"}, {"r": 1}, True), ("lookup", {"i": 1}, {"r": 2}, True)] * 4
    verbs = _drive(_guard(), calls)
    assert "deny" not in verbs and "would_block" in verbs
    enforced = [("ship", {"i": 1}, {"r": 1}, True), ("lookup", {"i": 1}, {"r": 2}, True)] * 4
    assert "deny" in _drive(_guard(), enforced)


def test_a_budget_counts_every_call_whoever_made_it() -> None:
    budget = {"max_tool_calls": 3, "max_turns": None, "max_seconds": None}
    calls = [("search", {"q": q}, {"r": q}, True) for q in "abc"] + [("lookup", {"i": 1}, {"r": 1}, True),
                                                                     ("search", {"q": "d"}, {"r": "d"}, True)]
    verbs = _drive(_guard(budget=budget), calls)
    assert verbs[3:] == ["deny", "would_block"]
    guard = _guard(budget=budget)
    _drive(guard, calls[:3])
    assert guard.stopped("r") is not None  # the run is stopped for enforced tools at once


def test_an_enforced_poll_budget_stops_the_run_after_an_observe_only_stop() -> None:
    """The run of all calls was stopped by the observe-only tool's loop; the enforced poller
    using up its poll budget afterwards still stops the run for enforced tools."""
    guard = _guard(tools={**MIXED, "status": {"poll": {"max_polls": 3},
                                              "progress": {"state_field": "state", "terminal_states": ["done"]}}})
    loop = [("search", {"q": "same"}, {"rows": []}, True)] * 5
    polls = [("status", {"job": 1}, {"state": "running"}, True)] * 3
    verbs = _drive(guard, loop + polls + [("lookup", {"i": 1}, {"r": 1}, True)])
    assert verbs[4] == "would_block"  # the observe-only loop: reported, not denied
    assert verbs[8] == "deny" and guard.stopped("r") is not None
