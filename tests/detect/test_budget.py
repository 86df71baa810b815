"""`budget` (tool calls, turns, cost, wall time) and `tool_cap` (calls per tool)."""

from __future__ import annotations


from otel_loopguard.detect.run import STOPPED_EARLIER

from .helpers import NO_BUDGETS, SEC, T0, Harness, brief, briefs, feed, spans


def distinct(n: int, tool: str = "read", turn: object = None) -> list[tuple]:
    return [(tool, {"i": i}, {"row": i}, turn) for i in range(n)]


# ---- max_tool_calls -------------------------------------------------------------------


def test_tool_calls_warn_at_ratio_and_stop_at_the_limit() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_tool_calls": 10}})
    h.feed(distinct(12))
    warn, stop = h.kind("budget")
    assert brief(warn) == ("budget", "warn", 8, 8, 1) and warn.span_ids == spans(8)
    assert brief(stop) == ("budget", "stop", 10, 10, 1) and stop.span_ids == spans(10)
    assert stop.reason == "the run used 10 tool calls of its budget of 10"
    assert len(h.findings) == 2  # once each, nothing after the limit


def test_tool_calls_below_the_warn_level_are_quiet() -> None:
    assert feed(distinct(7), {"budget": {**NO_BUDGETS, "max_tool_calls": 10}}) == []


def test_default_tool_call_budget() -> None:
    h = Harness({"budget": {"max_turns": None, "max_seconds": None}})
    h.feed(distinct(60))
    assert briefs(h.findings, "budget") == [("budget", "warn", 48, 48, 1), ("budget", "stop", 60, 60, 1)]


def test_custom_warn_ratio() -> None:
    pol = {"budget": {**NO_BUDGETS, "max_tool_calls": 10, "warn_ratio": 0.5}}
    assert briefs(feed(distinct(10), pol)) == [("budget", "warn", 5, 5, 1), ("budget", "stop", 10, 10, 1)]


def test_warn_level_rounding_up_to_the_limit_leaves_only_stop() -> None:
    pol = {"budget": {**NO_BUDGETS, "max_tool_calls": 3}}  # ceil(2.4) == 3
    assert briefs(feed(distinct(4), pol)) == [("budget", "stop", 3, 3, 1)]


def test_exact_warn_ratio_is_not_pushed_up_by_float_error() -> None:
    pol = {"budget": {**NO_BUDGETS, "max_tool_calls": 100, "warn_ratio": 0.55}}
    assert briefs(feed(distinct(55), pol)) == [("budget", "warn", 55, 55, 1)]


# ---- max_turns -------------------------------------------------------------------------


def test_turns_count_decisions_not_calls() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_turns": 5}})
    for turn in range(1, 7):
        h.call("read", {"t": turn, "k": 1}, {"r": turn, "k": 1}, turn=turn)
        h.call("read", {"t": turn, "k": 2}, {"r": turn, "k": 2}, turn=turn)  # a sibling
    assert briefs(h.findings, "budget") == [("budget", "warn", 7, 7, 1), ("budget", "stop", 9, 9, 1)]
    assert h.kind("budget")[1].reason == "the run used 5 turns of its budget of 5"


def test_calls_without_turns_never_use_the_turn_budget() -> None:
    assert feed(distinct(30), {"budget": {**NO_BUDGETS, "max_turns": 5}}) == []
    # Positive twin: the same calls, each in a turn of its own, stop at the fifth.
    steps = [(tool, args, result, i + 1) for i, (tool, args, result, _) in enumerate(distinct(30))]
    assert briefs(feed(steps, {"budget": {**NO_BUDGETS, "max_turns": 5}})) == [
        ("budget", "warn", 4, 4, 1), ("budget", "stop", 5, 5, 1)]


def test_turns_from_model_calls_and_tool_calls_count_once() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_turns": 3}})
    for turn in (1, 2):
        h.model(turn, 10, 10, "m")
        h.call("read", {"t": turn}, {"r": turn}, turn=turn)
    assert h.findings == []
    stop = h.model(3, 10, 10, "m")
    assert briefs(stop) == [("budget", "stop", 2, 2, 1)]  # evidence: the last call so far


def test_a_turn_budget_crossed_before_any_tool_call() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_turns": 1}})
    (stop,) = h.model(1, 5, 5)
    assert brief(stop) == ("budget", "stop", 0, 0, 0) and stop.seqs == ()


# ---- cost -------------------------------------------------------------------------------------


COST = {"budget": {**NO_BUDGETS, "max_cost_usd": 1.5}, "prices": {"m": {"input": 1.0, "output": 2.0}}}


def test_cost_warns_at_ratio_and_stops_at_the_limit() -> None:
    h = Harness(COST)
    assert h.model(1, 700_000, 0, "m") == []  # $0.70
    h.call("read", {"i": 1}, "r1", turn=1)
    (warn,) = h.model(2, 400_000, 100_000, "m")  # +$0.60 = $1.30 >= $1.20
    assert brief(warn) == ("budget", "warn", 1, 1, 1)
    assert warn.reason == "the run used 1.30 USD of its budget of 1.5"
    h.call("read", {"i": 2}, "r2", turn=2)
    (stop,) = h.model(3, 300_000, 0, "m")  # $1.60
    assert brief(stop) == ("budget", "stop", 2, 2, 1)
    assert h.model(4, 1_000_000, 0, "m") == []


def test_wildcard_price_applies_to_unknown_models() -> None:
    pol = {"budget": {**NO_BUDGETS, "max_cost_usd": 1.5}, "prices": {"*": {"input": 1.0, "output": 0.0}}}
    h = Harness(pol)
    assert [f.severity for f in h.model(1, 2_000_000, 0, "anything")] == ["stop"]


def test_a_model_without_a_price_costs_nothing() -> None:
    h = Harness(COST)
    assert h.model(1, 10_000_000, 10_000_000, "unpriced") == []
    assert h.model(2, 10_000_000, 10_000_000, None) == []


def test_whole_dollar_cost_budget_still_warns_at_ratio() -> None:
    pol = {"budget": {**NO_BUDGETS, "max_cost_usd": 2}, "prices": {"m": {"input": 1.0, "output": 0.0}}}
    h = Harness(pol)
    assert [f.severity for f in h.model(1, 1_700_000, 0, "m")] == ["warn"]  # $1.70 >= 0.8 x $2


# ---- max_seconds ------------------------------------------------------------------------------


def timed(h: Harness, i: int, start_s: float, end_s: float) -> list:
    return h.call("read", {"i": i}, {"r": i}, start_ns=T0 + int(start_s * SEC), end_ns=T0 + int(end_s * SEC))


def test_wall_time_from_the_first_start_to_each_end() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_seconds": 100}})
    assert timed(h, 1, 0, 1) == []
    assert timed(h, 2, 50, 79.9) == []
    assert briefs(timed(h, 3, 79.9, 80)) == [("budget", "warn", 3, 3, 1)]
    assert timed(h, 4, 80, 99.5) == []
    (stop,) = timed(h, 5, 99.5, 100)
    assert brief(stop) == ("budget", "stop", 5, 5, 1)
    assert stop.reason == "the run used 100.00 seconds of its budget of 100"
    assert timed(h, 6, 100, 500) == []


def test_calls_without_timestamps_never_use_the_time_budget() -> None:
    assert feed(distinct(30), {"budget": {**NO_BUDGETS, "max_seconds": 0.001}}) == []
    # Positive twin: the same budget with timestamps stops the second call (1 s > 1 ms).
    h = Harness({"budget": {**NO_BUDGETS, "max_seconds": 0.001}})
    assert timed(h, 1, 0, 0) == []
    assert briefs(timed(h, 2, 0, 1)) == [("budget", "stop", 2, 2, 1)]


# ---- tool_cap ------------------------------------------------------------------------------------


def test_tool_cap_counts_one_tool_only() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"web_search": {"max_calls": 5}}}
    h = Harness(pol)
    for i in range(7):
        h.call("web_search", {"q": i}, {"hits": [i]})
        h.call("read", {"i": i}, {"row": i})
    warn, stop = h.kind("tool_cap")
    assert (warn.severity, warn.seqs, warn.count, warn.tool) == ("warn", (7,), 4, "web_search")
    assert (stop.severity, stop.seqs, stop.count, stop.tool) == ("stop", (9,), 5, "web_search")
    assert stop.reason == "web_search was called 5 times; its cap is 5 calls per run"
    assert len(h.kind("tool_cap")) == 2


def test_tool_cap_below_warn_and_uncapped_tools_are_quiet() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"web_search": {"max_calls": 5}}}
    steps = [("web_search", {"q": i}, {"hits": [i]}) for i in range(3)] + distinct(20)
    assert feed(steps, pol) == []


# ---- preview: a budget used up stops the next call before it runs --------------------------------


def budget_previews(h: Harness, turn: object = None) -> list[tuple[str, str]]:
    """The budget detector's own preview: the run's "stopped earlier" entry, which repeats
    the stop that was observed, would hide a preview that says nothing."""
    call = h.fingerprint("read", {"next": h.seq + 1}, None, turn=turn)
    return [(lvl, reason) for lvl, kind, reason in h.run.preview(call)
            if kind == "budget" and not reason.startswith(STOPPED_EARLIER)]


def test_preview_stops_the_call_after_the_last_tool_call_allowed() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_tool_calls": 3}})
    h.feed(distinct(2))
    # The last call allowed runs, with the nudge warn_ratio gives it (issue 19), not a stop.
    assert budget_previews(h) == [("warn", "this is tool call 3 of the 3 the run may make")]
    h.feed([("read", {"i": 2}, {"row": 2})])
    assert budget_previews(h) == [("stop", "the run already used its budget of 3 tool calls")]


def test_preview_of_the_turn_budget_lets_the_last_turn_run_and_stops_the_next() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_turns": 2}})
    h.call("read", {"t": 1}, {"r": 1}, turn=1)
    last_turn = [("warn", "this is turn 2 of the 2 the run may take")]  # runs, with its nudge
    assert budget_previews(h, turn=2) == last_turn  # turn 2 is the last allowed
    h.call("read", {"t": 2}, {"r": 2}, turn=2)
    assert budget_previews(h, turn=2) == []  # a sibling in the last turn runs (nudged once already)
    assert budget_previews(h, turn=3) == [("stop", "the run already used its budget of 2 turns")]


def test_preview_stops_a_call_once_the_cost_budget_is_spent() -> None:
    h = Harness(COST)
    h.model(1, 1_000_000, 0, "m")  # $1.00 of $1.50
    assert budget_previews(h, turn=1) == []
    h.model(2, 500_000, 0, "m")  # $1.50: the limit
    assert budget_previews(h, turn=2) == [("stop", "the run already used its budget of 1.5 USD")]


def test_a_call_with_an_end_but_no_start_never_uses_the_time_budget() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_seconds": 1}})
    for i in range(3):
        assert h.call("read", {"i": i}, {"r": i}, end_ns=T0 + i * 10 * SEC) == []


def test_cost_weighs_input_and_output_tokens_by_their_own_prices() -> None:
    pol = {"budget": {**NO_BUDGETS, "max_cost_usd": 1.5}, "prices": {"m": {"input": 3.0, "output": 0.5}}}
    h = Harness(pol)
    (stop,) = h.model(1, 400_000, 600_000, "m")  # $1.20 + $0.30
    assert stop.reason == "the run used 1.50 USD of its budget of 1.5"


def test_each_capped_tool_has_its_own_warn_and_stop() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"a": {"max_calls": 5}, "b": {"max_calls": 5}}}
    h = Harness(pol)
    for i in range(5):
        h.call("a", {"i": i}, {"r": i})
        h.call("b", {"i": i}, {"r": i})
    assert [(f.tool, f.severity) for f in h.kind("tool_cap")] == [
        ("a", "warn"), ("b", "warn"), ("a", "stop"), ("b", "stop")]


def test_tool_cap_preview_before_the_cap_is_silent() -> None:
    h = Harness({"budget": NO_BUDGETS, "tools": {"web_search": {"max_calls": 1}}})
    assert budget_previews(h) == []
    call = h.fingerprint("web_search", {"q": 1}, None)
    # The one call allowed runs (a nudge at warn_ratio, issue 19), it is not refused.
    assert [p for p in h.run.preview(call) if p[1] == "tool_cap"] == [
        ("warn", "tool_cap", "this is call 1 of the 1 web_search may make per run")]
