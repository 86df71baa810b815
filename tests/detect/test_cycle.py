"""`cycle`: a block of 2..4 calls with at least two actions, repeated with the same results."""

from __future__ import annotations

from .helpers import NO_BUDGETS, Harness, brief, briefs, feed, spans

POL = {"budget": NO_BUDGETS}
A = ("read", {"path": "a.txt"}, "contents of a")
B = ("write", {"path": "a.txt", "text": "x"}, "written")
C = ("lint", {"path": "a.txt"}, "1 problem")
D = ("test", {"suite": "unit"}, "1 failure")


def test_two_call_pattern_warns_at_the_fourth_call_and_stops_at_the_sixth() -> None:
    h = Harness(POL)
    h.feed([A, B] * 3)
    warn, stop = h.kind("cycle")
    assert brief(warn) == ("cycle", "warn", 1, 4, 4) and h.fired_at(warn) == 4
    assert warn.seqs == (1, 2, 3, 4) and warn.span_ids == spans(1, 2, 3, 4)
    assert brief(stop) == ("cycle", "stop", 1, 6, 6) and h.fired_at(stop) == 6
    assert stop.seqs == (1, 2, 3, 4, 5, 6)
    assert warn.tool is None and warn.action is None  # about two actions, not one
    assert "2-call pattern (read -> write) repeated 3 times" in stop.reason


def test_two_call_pattern_boundaries() -> None:
    assert briefs(feed([A, B, A], POL), "cycle") == []
    assert briefs(feed([A, B] * 2, POL), "cycle") == [("cycle", "warn", 1, 4, 4)]
    assert briefs(feed([A, B] * 2 + [A], POL), "cycle") == [("cycle", "warn", 1, 4, 4)]


def test_a_later_start_gives_a_later_first_seq() -> None:
    x = ("plan", {}, "plan")
    assert briefs(feed([x, A, B, A, B], POL), "cycle") == [("cycle", "warn", 2, 5, 4)]


def test_three_call_pattern() -> None:
    h = Harness(POL)
    h.feed([A, B, C] * 3)
    assert briefs(h.findings, "cycle") == [("cycle", "warn", 1, 6, 6), ("cycle", "stop", 1, 9, 9)]
    assert [h.fired_at(f) for f in h.kind("cycle")] == [6, 9]


def test_four_call_pattern() -> None:
    h = Harness(POL)
    h.feed([A, B, C, D] * 3)
    assert briefs(h.findings, "cycle") == [("cycle", "warn", 1, 8, 8), ("cycle", "stop", 1, 12, 12)]
    assert h.kind("cycle")[1].seqs == tuple(range(1, 13))


def test_four_call_pattern_with_a_repeated_member_is_period_four() -> None:
    h = Harness(POL)
    h.feed([A, B, A, C] * 2)
    assert briefs(h.findings, "cycle") == [("cycle", "warn", 1, 8, 8)]
    assert "4-call pattern (read -> write -> read -> lint)" in h.kind("cycle")[0].reason


def test_five_call_pattern_is_beyond_max_period() -> None:
    e = ("deploy", {}, "queued")
    assert briefs(feed([A, B, C, D, e] * 3, POL), "cycle") == []


def test_changing_results_inside_the_block_is_not_a_cycle() -> None:
    steps = []
    for i in range(6):
        steps += [("read", {"path": "a.txt"}, f"contents v{i}"), B]
    assert briefs(feed(steps, POL), "cycle") == []


def test_a_changed_outcome_inside_the_block_is_not_a_cycle() -> None:
    fail = ("read", {"path": "a.txt"}, "contents of a", None, False)
    assert briefs(feed([A, B, fail, B], POL), "cycle") == []
    # ... though the longer block that includes the flip can itself repeat.
    assert briefs(feed([A, B, fail, B] * 2, POL), "cycle") == [("cycle", "warn", 1, 8, 8)]


def test_one_action_repeated_is_not_a_cycle() -> None:
    h = Harness(POL)
    h.feed([A] * 8)
    assert h.kind("cycle") == []
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3), ("repeat", "stop", 1, 5, 5)]


def test_broken_then_resumed_pattern_starts_a_new_episode() -> None:
    x = ("plan", {}, "plan")
    h = Harness(POL)
    h.feed([A, B, A, B, x, A, B, A, B])
    assert briefs(h.findings, "cycle") == [("cycle", "warn", 1, 4, 4), ("cycle", "warn", 6, 9, 4)]


def test_custom_thresholds_stop_beats_warn() -> None:
    pol = {"budget": NO_BUDGETS, "cycle": {"warn_at": 3, "stop_at": 3}}
    assert briefs(feed([A, B] * 4, pol), "cycle") == [("cycle", "stop", 1, 6, 6)]


def test_custom_period_range() -> None:
    pol = {"budget": NO_BUDGETS, "cycle": {"min_period": 3, "max_period": 3}}
    assert briefs(feed([A, B] * 4, pol), "cycle") == []
    assert briefs(feed([A, B, C] * 2, pol), "cycle") == [("cycle", "warn", 1, 6, 6)]


def _preview_levels(steps: list, pol: dict = POL) -> list[tuple[str | None, str | None]]:
    """(level the preview announced before each call, level observe emitted on it)."""
    h = Harness(pol)
    out = []
    for tool, args, result in steps:
        call = h.fingerprint(tool, args, result, seq=h.seq + 1)
        before = [lvl for lvl, kind, _ in h.run.preview(call) if kind == "cycle"]
        emitted = [f.severity for f in h.call(tool, args, result) if f.kind == "cycle"]
        out.append((before[0] if before else None, emitted[0] if emitted else None))
    return out


def test_preview_announces_every_cycle_stop_before_its_call() -> None:
    """The call that would complete the stopping repetition is announced as a stop; the
    first warn needs that call's own result and comes from observe."""
    # [A, B, A, C]: before the second A of a block, period 2 looks back at an A but has not
    # repeated; the longer period must still be tried.
    for block in ([A, B], [A, B, C], [A, B, C, D], [A, B, A, C]):
        pairs = _preview_levels(block * 3)
        assert pairs[-1] == ("stop", "stop")
        assert [e for _, e in pairs].count("warn") == 1
        assert all(a is None for a, _ in pairs[: 2 * len(block)])  # nothing before one full repetition
        assert all(a == "warn" for a, _ in pairs[2 * len(block) : -1])  # then each call is nudged


def test_preview_stays_silent_when_the_pattern_brings_new_results() -> None:
    changing = [(A[0], A[1], f"contents {i}") if i % 2 == 0 else B for i in range(8)]
    assert all(pair == (None, None) for pair in _preview_levels(changing))


def test_a_two_tool_cycle_whose_results_are_equal_is_still_a_cycle() -> None:
    """Actions make the block a cycle; equal results across its members must not hide it."""
    read = ("read", {"path": "a.txt"}, "ok")
    write = ("write", {"path": "a.txt", "text": "x"}, "ok")
    assert briefs(feed([read, write] * 3, POL), "cycle") == [("cycle", "warn", 1, 4, 4), ("cycle", "stop", 1, 6, 6)]


def test_one_action_alternating_between_two_results_is_a_repeat_not_a_cycle() -> None:
    """Two results of one action are not two members of a block: the repeat detector's case."""
    steps = [("read", {"path": "a.txt"}, f"v{i % 2}") for i in range(8)]
    h = Harness(POL)
    h.feed(steps)
    assert h.kind("cycle") == []
    assert [f.severity for f in h.kind("repeat")] == ["warn", "stop"]  # the negative control fires


def test_a_plain_repeat_after_other_calls_is_neither_found_nor_previewed_as_a_cycle() -> None:
    """Earlier different calls, still in the detector's memory, do not make a run of one
    action a block of several: only the last period's calls decide."""
    pairs = _preview_levels([B, C, D] + [A] * 8)
    assert pairs == [(None, None)] * 11
    h = Harness(POL)
    h.feed([B, C, D] + [A] * 8)
    assert h.kind("cycle") == [] and h.kind("repeat") != []


def _preview_reason(steps: list, nxt: tuple, pol: dict = POL) -> list[tuple[str, str]]:
    h = Harness(pol)
    h.feed(steps)
    call = h.fingerprint(*nxt)
    return [(lvl, reason) for lvl, kind, reason in h.run.preview(call) if kind == "cycle"]


def test_preview_reason_names_the_pattern_this_call_completes() -> None:
    assert _preview_reason([A, B] * 2, A) == [(
        "warn", "this call would complete 2 repetitions of the 2-call pattern (write -> read) with the "
        "same results (warn at 2, stop at 3 repetitions)",
    )]
    assert _preview_reason([A, B, C] * 2 + [A, B], C) == [(
        "stop", "this call would complete 3 repetitions of the 3-call pattern (read -> write -> lint) with "
        "the same results (warn at 2, stop at 3 repetitions)",
    )]


def test_preview_counts_whole_repetitions_only() -> None:
    """One call into a repetition is not a fraction of one: the count stays whole."""
    assert _preview_reason([A, B, C] * 2 + [A], B) == [(
        "warn", "this call would complete 2 repetitions of the 3-call pattern (lint -> read -> write) with "
        "the same results (warn at 2, stop at 3 repetitions)",
    )]


def test_reasons_say_what_was_compared() -> None:
    actions = {"budget": NO_BUDGETS, "cycle": {"compare": "actions"}}
    (warn,) = [f for f in feed([A, B] * 2, actions) if f.kind == "cycle"]
    assert warn.reason == ("the same 2-call pattern (read -> write) repeated 2 times with the same arguments "
                           "(warn at 2, stop at 3 repetitions)")
    (warn,) = [f for f in feed([A, B] * 2, POL) if f.kind == "cycle"]
    assert warn.reason == ("the same 2-call pattern (read -> write) repeated 2 times with the same results "
                           "(warn at 2, stop at 3 repetitions)")
    assert _preview_reason([A, B] * 2, A, actions)[0][1].endswith(
        "(write -> read) with the same arguments (warn at 2, stop at 3 repetitions)")


def test_preview_below_a_raised_warn_level_is_silent() -> None:
    pol = {"budget": NO_BUDGETS, "cycle": {"warn_at": 3, "stop_at": 4}}
    assert [a for a, _ in _preview_levels([A, B] * 4, pol)] == [None] * 5 + ["warn", "warn", "stop"]
