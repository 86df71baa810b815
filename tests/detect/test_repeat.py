"""`repeat`: the same action in consecutive decisions (or within a window) without progress."""

from __future__ import annotations

import json

import pytest

from .helpers import NO_BUDGETS, Harness, brief, briefs, feed, spans

LOOKUP = "lookup_order"
DELIVERED_7 = {"status": "delivered", "version": 7}
SEED_POLICY = {
    "budget": NO_BUDGETS,
    "repeat": {"allowed_repeats": 2},
    "tools": {LOOKUP: {"progress": {"version_field": "version"}}},
}


def lookups(n: int, result: object = DELIVERED_7, args: object = None) -> list[tuple]:
    return [(LOOKUP, args or {"order_id": "A12"}, result) for _ in range(n)]


# ---- threshold boundaries (default: warn 3, stop 5) -------------------------------


@pytest.mark.parametrize(
    "n, expected",
    [
        (0, []),
        (1, []),
        (2, []),
        (3, [("repeat", "warn", 1, 3, 3)]),
        (4, [("repeat", "warn", 1, 3, 3)]),
        (5, [("repeat", "warn", 1, 3, 3), ("repeat", "stop", 1, 5, 5)]),
    ],
)
def test_default_thresholds_at_each_count(n: int, expected: list) -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.feed(lookups(n))
    assert briefs(h.findings, "repeat") == expected


def test_warn_and_stop_fire_on_the_completing_call_with_exact_evidence() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.feed(lookups(7))
    warn, stop = h.kind("repeat")
    assert h.fired_at(warn) == 3 and h.fired_at(stop) == 5
    assert warn.seqs == (1, 2, 3) and warn.span_ids == spans(1, 2, 3)
    assert stop.seqs == (1, 2, 3, 4, 5) and stop.span_ids == spans(1, 2, 3, 4, 5)
    assert warn.tool == stop.tool == LOOKUP
    assert warn.action == stop.action == h.calls[0].action
    assert stop.reason.startswith("lookup_order was called 5 times in a row")
    assert "warn at 3, stop at 5" in stop.reason


# ---- the seed scenario: allowed_repeats 2, the third unchanged lookup ---------------


def seed_calls(*versions: int, args: tuple = ({"order_id": "A12"},) * 3) -> list[dict]:
    return [
        {"tool": LOOKUP, "args": a, "result": {"status": "delivered", "version": v}, "seq": s}
        for s, a, v in zip((10, 20, 30), args, versions)
    ]


def test_seed_third_unchanged_lookup_is_the_finding() -> None:
    h = Harness(SEED_POLICY)
    h.feed(seed_calls(7, 7, 7))
    assert briefs(h.findings) == [("repeat", "stop", 10, 30, 3)]  # stop beats warn at 3
    (f,) = h.findings
    assert f.seqs == (10, 20, 30) and f.span_ids == spans(10, 20, 30)
    assert f.tool == LOOKUP and h.fired_at(f) == 30


def test_seed_mutation_remove_the_third_call_clears() -> None:
    assert feed(seed_calls(7, 7), SEED_POLICY) == []


def test_seed_mutation_third_version_advances_clears() -> None:
    assert feed(seed_calls(7, 7, 8), SEED_POLICY) == []


def test_seed_mutation_version_advance_clears_without_declared_rule_too() -> None:
    pol = {"budget": NO_BUDGETS, "repeat": {"allowed_repeats": 2}}
    assert briefs(feed(seed_calls(7, 7, 7), pol)) == [("repeat", "stop", 10, 30, 3)]
    assert feed(seed_calls(7, 7, 8), pol) == []


def test_seed_mutation_only_arguments_change_gives_a_new_digest_and_no_finding() -> None:
    h = Harness(SEED_POLICY)
    args = ({"order_id": "A12"}, {"order_id": "A12"}, {"order_id": "A13"})
    h.feed(seed_calls(7, 7, 7, args=args))
    assert h.calls[0].action == h.calls[1].action != h.calls[2].action
    assert h.findings == []


def test_seed_negative_control_status_advancing_each_time() -> None:
    h = Harness(SEED_POLICY)
    for seq, (status, version) in zip((10, 20, 30), [("pending", 7), ("pending", 8), ("delivered", 9)]):
        h.call(LOOKUP, {"order_id": "A12"}, {"status": status, "version": version}, seq=seq)
    assert h.findings == []


def test_argument_key_order_does_not_matter() -> None:
    h = Harness({"budget": NO_BUDGETS})
    forms = [
        '{"order_id":"A12","include_items":true}',
        '{"include_items": true, "order_id": "A12"}',
        {"include_items": True, "order_id": "A12"},
    ]
    for form in forms:
        h.call(LOOKUP, form, DELIVERED_7)
    assert len({c.action for c in h.calls}) == 1
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3)]


def test_argument_values_do_matter() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for args in ({"order_id": "A12"}, {"order_id": "a12"}, {"order_id": "A12 "}, {"order_id": ["A12"]}):
        h.call(LOOKUP, args, DELIVERED_7)
    assert len({c.action for c in h.calls}) == 4
    assert h.kind("repeat") == []


@pytest.mark.parametrize("cursor", ["page-2", "page-3"])
def test_pagination_cursor_a_b_a_is_not_a_repeat(cursor: str) -> None:
    pol = {"budget": NO_BUDGETS, "repeat": {"allowed_repeats": 1}}
    steps = [
        ("search_cases", {"query": "refund", "cursor": None}, {"ok": 1}),
        ("search_cases", {"query": "refund", "cursor": cursor}, {"ok": 1}),
        ("search_cases", {"query": "refund", "cursor": None}, {"ok": 1}),
    ]
    assert feed(steps, pol) == []
    # Positive control: the same policy does fire on two in a row.
    assert briefs(feed(steps[:1] * 2, pol)) == [("repeat", "stop", 1, 2, 2)]


def test_an_intermediate_other_tool_resets_the_count() -> None:
    other = ("read_refund_policy", {}, "policy text")
    steps = lookups(2) + [other] + lookups(2)
    assert feed(steps, {"budget": NO_BUDGETS}) == []
    seed = lookups(2) + [other] + lookups(1)
    assert feed(seed, SEED_POLICY) == []
    # ... and the count restarts from the call after it.
    h = Harness({"budget": NO_BUDGETS})
    h.feed(lookups(2) + [other] + lookups(3))
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 4, 6, 3)]


def test_progress_starts_a_new_episode_that_can_warn_again() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.feed(lookups(3, {"v": 1}) + lookups(3, {"v": 2}))
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3), ("repeat", "warn", 4, 6, 3)]


def test_window_mode_catches_interleaved_repeats() -> None:
    pol = {"budget": NO_BUDGETS, "repeat": {"mode": "window", "window": 20}}
    a = ("lookup", {"id": 1}, "same")
    steps = [a, ("b", {}, "rb"), a, ("c", {}, "rc"), a, ("d", {}, "rd"), a, ("e", {}, "re"), a]
    h = Harness(pol)
    h.feed(steps)
    warn, stop = h.kind("repeat")
    assert brief(warn) == ("repeat", "warn", 1, 5, 3) and warn.seqs == (1, 3, 5)
    assert brief(stop) == ("repeat", "stop", 1, 9, 5) and stop.seqs == (1, 3, 5, 7, 9)
    assert stop.span_ids == spans(1, 3, 5, 7, 9) and stop.tool == "lookup"
    assert h.fired_at(warn) == 5 and h.fired_at(stop) == 9
    # Negative control: consecutive mode does not see it.
    assert of_repeat(feed(steps, {"budget": NO_BUDGETS})) == []


def test_window_mode_forgets_calls_outside_the_window() -> None:
    pol = {"budget": NO_BUDGETS, "repeat": {"mode": "window", "window": 5}}
    steps = []
    for i in range(6):  # the action every third decision: at most 2 inside any 5
        steps += [("lookup", {"id": 1}, "same"), ("x", {"i": i}, f"x{i}"), ("y", {"i": i}, f"y{i}")]
    assert of_repeat(feed(steps, pol)) == []
    # Positive control: every other decision puts 3 inside 5.
    steps = []
    for i in range(3):
        steps += [("lookup", {"id": 1}, "same"), ("x", {"i": i}, f"x{i}")]
    assert briefs(feed(steps, pol), "repeat") == [("repeat", "warn", 1, 5, 3)]


def test_exempt_tool_never_repeats_but_counts_for_the_budget() -> None:
    pol = {
        "budget": {**NO_BUDGETS, "max_tool_calls": 10},
        "tools": {"get_status": {"exempt_repeat": True}},
    }
    h = Harness(pol)
    h.feed([("get_status", {"job": 1}, "running")] * 10)
    assert h.kind("repeat") == []
    assert briefs(h.findings, "budget") == [("budget", "warn", 8, 8, 1), ("budget", "stop", 10, 10, 1)]
    # Negative control: the same calls from a tool that is not exempt.
    assert briefs(feed([("get_other", {"job": 1}, "running")] * 5, pol), "repeat") == [
        ("repeat", "warn", 1, 3, 3),
        ("repeat", "stop", 1, 5, 5),
    ]


def test_stop_beats_warn_when_thresholds_are_equal() -> None:
    h = Harness({"budget": NO_BUDGETS, "repeat": {"warn_at": 4, "stop_at": 4}})
    h.feed(lookups(6))
    assert briefs(h.findings, "repeat") == [("repeat", "stop", 1, 4, 4)]


def test_per_tool_repeat_rule_overrides_the_global_one() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"cheap": {"repeat": {"warn_at": 6, "stop_at": 8}}}}
    h = Harness(pol)
    h.feed([("cheap", {}, "r")] * 5 + [("other", {}, "o")] + lookups(3))
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 7, 9, 3)]
    assert h.kind("repeat")[0].tool == LOOKUP


def test_repeat_counts_a_failing_identical_call_too() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.feed([(LOOKUP, {"order_id": "A12"}, {"error": "timeout"}, None, False)] * 3)
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3)]


def test_json_text_and_parsed_results_digest_alike() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.call(LOOKUP, {"order_id": "A12"}, json.dumps({"version": 7, "status": "delivered"}))
    h.call(LOOKUP, {"order_id": "A12"}, {"status": "delivered", "version": 7})
    assert h.calls[0].result == h.calls[1].result


def of_repeat(findings: list) -> list:
    return [f for f in findings if f.kind == "repeat"]


# ---- preview: before dispatch, the count this call would reach -----------------------------------


def _previews(h: Harness, steps: list[tuple]) -> list[tuple[str, str] | None]:
    """Before each call: the repeat preview (level, reason), or None; then the call runs."""
    out: list[tuple[str, str] | None] = []
    for tool, args, result, *turn in steps:
        call = h.fingerprint(tool, args, result, turn=turn[0] if turn else None)
        found = [(lvl, reason) for lvl, kind, reason in h.run.preview(call) if kind == "repeat"]
        out.append(found[0] if found else None)
        h.call(tool, args, result, turn=turn[0] if turn else None)
    return out


def _levels(previews: list[tuple[str, str] | None]) -> list[str | None]:
    return [p[0] if p else None for p in previews]


def test_preview_announces_the_stop_on_the_call_that_would_reach_it() -> None:
    h = Harness({"budget": NO_BUDGETS})
    previews = _previews(h, lookups(5))
    assert _levels(previews) == [None, None, "warn", "warn", "stop"]
    assert previews[4] == ("stop", f"{LOOKUP} would be called 5 times in a row with the same arguments after "
                                   "calls that made no progress (warn at 3, stop at 5)")
    assert briefs(h.kind("repeat"))[-1] == ("repeat", "stop", 1, 5, 5)  # observe agrees


def test_preview_in_window_mode_counts_the_call_itself() -> None:
    pol = {"budget": NO_BUDGETS, "repeat": {"mode": "window", "window": 20}}
    a = ("lookup", {"id": 1}, "same")
    steps = [a, ("b", {}, "rb"), a, ("c", {}, "rc"), a, ("d", {}, "rd"), a, ("e", {}, "re"), a]
    h = Harness(pol)
    previews = _previews(h, steps)
    assert _levels(previews[::2]) == [None, None, "warn", "warn", "stop"]
    assert "would be called 5 times" in previews[8][1]
    assert h.fired_at(h.kind("repeat")[-1]) == 9  # observe stops the same call


def test_preview_in_window_mode_forgets_calls_outside_the_window() -> None:
    """At decision 6 of a 5-decision window, decision 1 is out: as observe() counts."""
    pol = {"budget": NO_BUDGETS, "repeat": {"mode": "window", "window": 5}}
    a = ("lookup", {"id": 1}, "same")
    h = Harness(pol)
    assert _levels(_previews(h, [a, ("x", {}, "x"), a, ("y", {}, "y"), ("z", {}, "z"), a])) == [None] * 6
    assert h.kind("repeat") == []
    # Positive control: at decision 5, decisions 1 and 3 are both inside.
    h = Harness(pol)
    assert _levels(_previews(h, [a, ("x", {}, "x"), a, ("y", {}, "y"), a]))[-1] == "warn"
    assert briefs(h.kind("repeat")) == [("repeat", "warn", 1, 5, 3)]


@pytest.mark.parametrize("mode", ["consecutive", "window"])
def test_preview_of_a_sibling_in_the_same_decision_counts_nothing(mode: str) -> None:
    """A parallel sibling of a call this decision already made is parallel_duplicate's
    business: it never counts as one more repeat."""
    h = Harness({"budget": NO_BUDGETS, "repeat": {"mode": mode, "window": 20}})
    a = (LOOKUP, {"order_id": "A12"}, "same")
    assert _levels(_previews(h, [(*a, 1), (*a, 2), (*a, 3), (*a, 3), (*a, 4)])) == [None, None, "warn", None, "warn"]


def test_preview_uses_the_tools_own_repeat_rule() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {LOOKUP: {"repeat": {"warn_at": 2, "stop_at": 3}}}}
    h = Harness(pol)
    assert _levels(_previews(h, lookups(3))) == [None, "warn", "stop"]
    # Negative control: another tool keeps the global rule.
    h = Harness(pol)
    assert _levels(_previews(h, [("other", {"q": 1}, "same")] * 3)) == [None, None, "warn"]


def test_preview_of_an_exempt_tool_is_silent() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"get_status": {"exempt_repeat": True}}}
    h = Harness(pol)
    assert _levels(_previews(h, [("get_status", {"job": 1}, "running")] * 6)) == [None] * 6


def test_preview_counts_the_previous_decisions_streak_for_a_second_call_of_this_decision() -> None:
    """Turn 3 already called something else: the lookup would still continue turns 1-2's streak."""
    h = Harness({"budget": NO_BUDGETS})
    a = (LOOKUP, {"order_id": "A12"}, "same")
    assert _levels(_previews(h, [(*a, 1), (*a, 2), ("other", {}, "o", 3), (*a, 3)])) == [None, None, None, "warn"]


def test_preview_of_a_sibling_counts_nothing_even_with_a_threshold_of_one() -> None:
    h = Harness({"budget": NO_BUDGETS, "repeat": {"warn_at": 1, "stop_at": 3}})
    a = (LOOKUP, {"order_id": "A12"}, "same")
    assert _levels(_previews(h, [(*a, 1), (*a, 1)])) == ["warn", None]
    h = Harness({"budget": NO_BUDGETS, "repeat": {"mode": "window", "window": 5, "warn_at": 1, "stop_at": 3}})
    assert _levels(_previews(h, [(*a, 1), (*a, 1)])) == ["warn", None]


# ---- window mode: each level once per episode ---------------------------------------------------


WINDOW_5 = {"budget": NO_BUDGETS, "repeat": {"mode": "window", "window": 5}}


def _alternating(n: int) -> list[tuple]:
    """The lookup every other decision, something new in between."""
    return [(LOOKUP, {"order_id": "A12"}, "same") if i % 2 == 0 else ("note", {"i": i}, f"n{i}") for i in range(n)]


def test_window_mode_warns_once_while_the_count_stays_at_the_warn_level() -> None:
    h = Harness(WINDOW_5)
    h.feed(_alternating(16))  # 3 lookups in every 5 decisions, 8 in all
    (warn,) = h.kind("repeat")
    assert brief(warn) == ("repeat", "warn", 1, 5, 3) and warn.count == 3
    assert warn.reason == (f"{LOOKUP} was called 3 times within 5 decisions with the same arguments and no "
                           "progress (warn at 3, stop at 5)")


def test_window_mode_warns_again_after_the_count_fell_below_the_warn_level() -> None:
    h = Harness(WINDOW_5)
    quiet = [("note", {"q": i}, f"q{i}") for i in range(4)]
    h.feed(_alternating(5) + quiet + _alternating(5))
    assert briefs(h.kind("repeat")) == [("repeat", "warn", 1, 5, 3), ("repeat", "warn", 10, 14, 3)]


def test_window_mode_with_a_threshold_of_one_warns_once_then_stops() -> None:
    pol = {"budget": NO_BUDGETS, "repeat": {"mode": "window", "window": 5, "warn_at": 1, "stop_at": 3}}
    h = Harness(pol)
    h.feed(lookups(3))
    assert [(f.severity, f.count) for f in h.kind("repeat")] == [("warn", 1), ("stop", 3)]
