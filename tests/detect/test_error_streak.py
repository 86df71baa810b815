"""`error_streak`: decisions in a row whose tool calls failed (siblings count once)."""

from __future__ import annotations

import pytest

from .helpers import NO_BUDGETS, Harness, brief, briefs, feed, spans

POL = {"budget": NO_BUDGETS}


def fail(args: object = None, error: str = "ValueError: bad input", turn: object = None, tool: str = "parse") -> tuple:
    return (tool, args or {"n": 1}, {"error": error}, turn, False)


def ok(args: object = None, turn: object = None, tool: str = "parse") -> tuple:
    return (tool, args or {"n": 1}, {"parsed": repr(args)}, turn, True)


def test_same_action_failing_warns_at_two_and_stops_at_four() -> None:
    h = Harness(POL)
    h.feed([fail()] * 5)
    warn, stop = h.kind("error_streak")
    assert brief(warn) == ("error_streak", "warn", 1, 2, 2) and h.fired_at(warn) == 2
    assert brief(stop) == ("error_streak", "stop", 1, 4, 4) and h.fired_at(stop) == 4
    assert stop.seqs == (1, 2, 3, 4) and stop.span_ids == spans(1, 2, 3, 4)
    assert stop.tool == "parse" and stop.action == h.calls[0].action
    assert stop.reason == ("4 decisions in a row ended in failed tool calls, the same action failing with "
                           "the same error each time (warn at 2, stop at 4)")


@pytest.mark.parametrize("n, expected", [(1, []), (2, ["warn"]), (3, ["warn"]), (4, ["warn", "stop"])])
def test_boundaries(n: int, expected: list) -> None:
    assert [f.severity for f in feed([fail({"n": i}) for i in range(n)], POL) if f.kind == "error_streak"] == expected


def test_different_actions_failing_say_so() -> None:
    h = Harness(POL)
    h.feed([fail({"n": 1}), fail({"n": 2}), fail({"n": 3}), fail({"n": 4})])
    warn, stop = h.kind("error_streak")
    assert brief(warn) == ("error_streak", "warn", 1, 2, 2)
    assert "across 2 different actions" in warn.reason
    assert "across 4 different actions" in stop.reason
    assert "same action" not in stop.reason
    assert stop.action is None and stop.tool == "parse"


def test_different_tools_failing_name_no_tool() -> None:
    h = Harness(POL)
    h.feed([fail(tool="parse"), fail(tool="fetch")])
    (warn,) = h.kind("error_streak")
    assert warn.tool is None and warn.action is None


def test_one_action_with_changing_errors_is_not_called_different_actions() -> None:
    h = Harness(POL)
    h.feed([fail(error="timeout"), fail(error="rate limited")])
    (warn,) = h.kind("error_streak")
    assert warn.reason == ("2 decisions in a row ended in failed tool calls, the same action failing with "
                           "changing errors (warn at 2, stop at 4)")


def test_failed_siblings_of_one_decision_count_once() -> None:
    h = Harness(POL)
    h.feed([fail({"n": 1}, turn=1), fail({"n": 2}, turn=1), fail({"n": 3}, turn=1)])
    assert h.kind("error_streak") == []
    h.feed([fail({"n": 4}, turn=2)])
    (warn,) = h.kind("error_streak")
    assert brief(warn) == ("error_streak", "warn", 1, 4, 4) and warn.seqs == (1, 2, 3, 4)
    assert warn.reason.startswith("2 decisions in a row")
    h.feed([fail({"n": 5}, turn=3), fail({"n": 6}, turn=4)])
    stop = h.kind("error_streak")[1]
    assert (stop.severity, stop.first_seq, stop.last_seq, stop.seqs) == ("stop", 1, 6, (1, 2, 3, 4, 5, 6))
    assert stop.reason.startswith("4 decisions in a row")
    assert h.fired_at(stop) == 6


def test_the_same_calls_without_turns_are_separate_decisions() -> None:
    # Negative control for the batch rule: no turn, so every call is a decision.
    assert briefs(feed([fail({"n": i}) for i in range(3)], POL), "error_streak") == [
        ("error_streak", "warn", 1, 2, 2)
    ]


def test_a_success_resets_the_streak() -> None:
    h = Harness(POL)
    h.feed([fail(), fail(), ok(), fail(), ok(), fail(), fail(), fail(), fail()])
    assert briefs(h.findings, "error_streak") == [
        ("error_streak", "warn", 1, 2, 2),
        ("error_streak", "warn", 6, 7, 2),
        ("error_streak", "stop", 6, 9, 4),
    ]


def test_alternating_failure_and_success_never_fires() -> None:
    steps = [fail() if i % 2 == 0 else ok() for i in range(30)]
    assert briefs(feed(steps, POL), "error_streak") == []


def test_a_call_with_unknown_outcome_neither_extends_nor_breaks() -> None:
    h = Harness(POL)
    h.call("parse", {"n": 1}, {"error": "e"}, ok=False)
    h.call("parse", {"n": 2}, None, ok=None, finished=False)
    h.call("parse", {"n": 3}, {"error": "e"}, ok=False)
    assert briefs(h.findings, "error_streak") == [("error_streak", "warn", 1, 3, 2)]
    assert h.kind("error_streak")[0].seqs == (1, 3)


def test_mixed_siblings_do_not_depend_on_their_order() -> None:
    def run(first_ok: bool) -> list:
        siblings = [ok({"n": 1}, turn=1), fail({"n": 2}, turn=1)]
        if not first_ok:
            siblings.reverse()
        return briefs(feed(siblings + [fail({"n": 3}, turn=2)], POL), "error_streak")

    assert run(first_ok=True) == run(first_ok=False)


def test_custom_thresholds() -> None:
    pol = {"budget": NO_BUDGETS, "error_streak": {"warn_at": 3, "stop_at": 3}}
    assert briefs(feed([fail()] * 4, pol), "error_streak") == [("error_streak", "stop", 1, 3, 3)]


def test_a_threshold_of_one_fires_on_the_first_failure() -> None:
    h = Harness({"budget": NO_BUDGETS, "error_streak": {"warn_at": 1, "stop_at": 2}})
    h.feed([fail()])
    (warn,) = h.kind("error_streak")
    assert brief(warn) == ("error_streak", "warn", 1, 1, 1)
    assert (warn.tool, warn.action) == ("parse", h.calls[0].action)
