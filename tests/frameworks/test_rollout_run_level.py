"""Run-level detectors in a mixed rollout (issue 28, defect 5; docs/rollout.md "Per-tool
semantics"), on all three adapters. The rule:

- streaks and patterns across tools (`error_streak`, `no_progress`, `cycle`) stop the run for
  enforced tools only on enforced tools' calls: an observe-only call neither counts toward the
  enforced stop nor lets it span across it; every call counts toward `would_block`, as the
  processor marks it;
- budgets are the run's totals: every call counts, whoever made it, and once one is used up
  every later enforced call is denied (observe-only calls run, with `would_block`).

Each detector both ways: observe-only calls bring the run to the threshold and an enforced call
crosses it (no denial, a would_block), and enforced calls alone cross it (denied).
`search_cases` is observe-only; `lookup_order` and `get_shipping` are enforced.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from .rollout_harness import FakeClock, Failure, drive, same_answer  # noqa: E402,F401

NO_BUDGETS = "budget: {max_tool_calls: null, max_turns: null, max_seconds: null}\n"
MIXED = "tools:\n  search_cases: {enforce: false}\n"
STREAKS = ("version: streaks-1\n" + NO_BUDGETS + MIXED
           + "error_streak: {warn_at: 3, stop_at: 4}\nno_progress: {warn_at: 3, stop_at: 4}\n"
           + "cycle: {warn_at: 2, stop_at: 3}\n")


def _search(q: str) -> list:
    return [("search_cases", {"query": q})]


def _lookup(order: str) -> list:
    return [("lookup_order", {"order_id": order})]


def _ship(order: str) -> list:
    return [("get_shipping", {"order_id": order})]


def _failing(tool: str, args: dict) -> Any:
    raise Failure(f"{tool} failed for {args}")


def _blocks(out: Any) -> list[tuple[str, str]]:
    return [(d[1], d[2]) for d in out.decisions if d[0] == "would_block"]


# -- error_streak --------------------------------------------------------------------------------

def test_error_streak_completed_by_an_enforced_call_after_observe_only_failures_denies_nothing(drive: Any) -> None:
    turns = [_search("a"), _search("b"), _search("c"), _lookup("A1"), _lookup("A2"), _ship("A3")]
    out = drive(STREAKS, turns, behave=_failing)
    assert out.denied() == []  # the enforced tool's one failure is no streak of its own
    assert len(out.ran) == 6
    assert ("error_streak", "lookup_order") in _blocks(out)  # what enforcing every tool would deny
    assert out.processor_marks("would_block", "error_streak")[0] == 5


def test_error_streak_of_enforced_calls_stops_the_run(drive: Any) -> None:
    turns = [_lookup("A1"), _ship("A2"), _lookup("A3"), _ship("A4"), _lookup("A5"), _search("x"), _ship("A6")]
    out = drive(STREAKS, turns, behave=_failing)
    assert out.denied() == [5, 7]  # the streak of four stops the run; the observe-only search runs
    assert out.count("search_cases") == 1


def test_an_observe_only_call_inside_an_enforced_error_streak_breaks_it_for_enforcement(drive: Any) -> None:
    turns = [_lookup("A1"), _ship("A2"), _search("x"), _lookup("A3"), _ship("A4"), _lookup("A5")]
    out = drive(STREAKS, turns, behave=_failing)
    assert out.denied() == []  # two, then two: never four enforced failures in a row
    assert ("error_streak", "lookup_order") in _blocks(out)


# -- no_progress ---------------------------------------------------------------------------------

def _same_everywhere(tool: str, args: dict) -> Any:
    return {"rows": []}  # every tool, every argument: nothing new after the first call


def test_no_progress_completed_by_an_enforced_call_after_observe_only_calls_denies_nothing(drive: Any) -> None:
    turns = [_search("a"), _search("b"), _search("c"), _search("d"), _lookup("A1"), _lookup("A2"), _ship("A3")]
    out = drive(STREAKS, turns, behave=_same_everywhere)
    assert out.denied() == [] and len(out.ran) == 7
    assert "no_progress" in {kind for kind, _ in _blocks(out)}
    assert out.processor_marks("would_block", "no_progress")[0] == 6


def test_no_progress_of_enforced_calls_stops_the_run(drive: Any) -> None:
    turns = [_lookup(f"A{i}") for i in range(5)] + [_search("x"), _ship("B1")]
    out = drive(STREAKS, turns, behave=_same_everywhere)
    assert out.denied() == [7]  # the 5th lookup completes the streak: the next enforced call is denied
    assert out.count("lookup_order") == 5 and out.count("search_cases") == 1 and out.count("get_shipping") == 0


# -- cycle ---------------------------------------------------------------------------------------

def test_a_cycle_through_an_observe_only_tool_is_a_would_block_only(drive: Any) -> None:
    turns = [_search("q"), _lookup("A12")] * 4
    out = drive(STREAKS, turns)
    assert out.denied() == [] and len(out.ran) == 8
    assert "cycle" in {kind for kind, _ in _blocks(out)}


def test_a_cycle_of_enforced_tools_is_denied(drive: Any) -> None:
    turns = [_ship("A12"), _lookup("A12")] * 4
    out = drive(STREAKS, turns)
    assert out.denied()[0] == 6 and out.denied() == list(range(6, 9))
    assert [d[1] for d in out.decisions if d[0] == "deny"][0] == "cycle"


# -- budgets: the run's totals, whoever spent them -------------------------------------------------

CALLS = "version: calls-1\nbudget: {max_tool_calls: 4, max_turns: null, max_seconds: null}\n" + MIXED
SECONDS = "version: seconds-1\nbudget: {max_seconds: 1, max_turns: null, max_tool_calls: null}\n" + MIXED


def test_a_call_budget_spent_by_observe_only_calls_denies_the_enforced_tool(drive: Any) -> None:
    out = drive(CALLS, [_search(q) for q in "abcd"] + [_lookup("A1"), _search("e"), _ship("A2")])
    assert out.denied() == [5, 7] and out.count("search_cases") == 5
    assert ("budget", "search_cases") in _blocks(out)


def test_a_call_budget_spent_by_enforced_calls_lets_the_observe_only_tool_run(drive: Any) -> None:
    out = drive(CALLS, [_lookup(f"A{i}") for i in range(4)] + [_search("a"), _lookup("A9")])
    assert out.denied() == [6] and out.count("search_cases") == 1


def _slow(clock: FakeClock) -> Any:
    def behave(tool: str, args: dict) -> Any:
        clock.advance(0.25)
        return same_answer(tool, args) if tool != "search_cases" else {"cases": [args["query"]]}
    return behave


def test_wall_time_spent_by_observe_only_calls_denies_the_enforced_tool(drive: Any) -> None:
    clock = FakeClock()
    out = drive(SECONDS, [_search(q) for q in "abcd"] + [_lookup("A1"), _search("e")], behave=_slow(clock), clock=clock)
    assert out.denied() == [5] and out.count("search_cases") == 5


def test_wall_time_spent_by_enforced_calls_lets_the_observe_only_tool_run(drive: Any) -> None:
    clock = FakeClock()
    out = drive(SECONDS, [_lookup(f"A{i}") for i in range(4)] + [_search("a"), _ship("A9")],
                behave=_slow(clock), clock=clock)
    assert out.denied() == [6] and out.count("search_cases") == 1
