"""The progress tracker's judgement with equivalence (docs/equivalence.md): the same answer in
shape, items new to the run, sampling levels, echoes, and a new action's acknowledgement."""

from __future__ import annotations

from typing import Any

from otel_loopguard.calls import Equivalence, ToolCall
from otel_loopguard.policy import Policy, policy_from_mapping
from otel_loopguard.progress import ProgressTracker


def tc(seq: int, action: str, result: str, eq: Equivalence, ok: bool = True, tool: str = "t") -> ToolCall:
    return ToolCall(seq=seq, tool=tool, action=action, result=result, ok=ok, equivalence=eq)


def judge(calls: list[ToolCall], policy: Policy = Policy()) -> list[Any]:
    tracker = ProgressTracker(policy)
    return [tracker.judge(c) for c in calls]


def packed(*hashes: int) -> bytes:
    return b"".join(h.to_bytes(8, "big") for h in sorted(hashes))


def items(*hashes: int, level: int = 0, count: int = 0) -> Equivalence:
    return Equivalence(items=packed(*hashes), item_count=count or len(hashes), level=level)


def test_the_same_action_with_the_same_shape_is_nothing_new() -> None:
    shaped = Equivalence(shape="S", item_count=1, items=packed(1 << 60))
    fresh = Equivalence(shape="S", item_count=1, items=packed(2 << 60))  # items differ, the shape does not
    got = judge([tc(1, "a", "r1", shaped), tc(2, "a", "r2", fresh)])
    assert [j.novel_result for j in got] == [True, False]


def test_items_decide_across_actions_whatever_the_order() -> None:
    got = judge([tc(1, "a", "r1", items(1, 2, 3)), tc(2, "b", "r2", items(3, 2)), tc(3, "c", "r3", items(2, 4))])
    assert [j.novel_result for j in got] == [True, False, True]


def test_an_item_is_judged_only_at_the_highest_sampling_level_the_tool_needed() -> None:
    big = 1 << 58  # six leading zero bits: kept at levels up to 6
    small = 1 << 63  # no leading zero bit: kept only at level 0
    # A sampled answer (level 3) kept `big`; a later small answer of the same tool shows `small`,
    # which the sampled one may have held without keeping it: not evidence of anything new.
    got = judge([tc(1, "a", "r1", items(big, level=3, count=100)), tc(2, "b", "r2", items(big, small))])
    assert [j.novel_result for j in got] == [True, False]
    # ... but a new item at the level is news, and another tool's level is its own.
    newer = 1 << 57
    got = judge([tc(1, "a", "r1", items(big, level=3, count=100)), tc(2, "b", "r2", items(newer, small)),
                 tc(3, "c", "r3", items(small + 1), tool="other")])
    assert [j.novel_result for j in got] == [True, True, True]


def test_no_item_at_the_level_falls_back_on_the_digests() -> None:
    got = judge([tc(1, "a", "r1", items(1 << 58, level=3, count=100)), tc(2, "b", "r2", items(1 << 63)),
                 tc(3, "c", "r2", items(1 << 63))])
    assert [j.novel_result for j in got] == [True, True, False]


def test_only_echoes_is_nothing_new_and_a_new_actions_acknowledgement_is_neutral() -> None:
    echo = Equivalence(item_count=0, echoed=1)
    found_nothing = Equivalence(item_count=0, empty_list=True)
    got = judge([tc(1, "a", "r1", echo), tc(2, "a", "r1", echo), tc(3, "b", "r3", echo, ok=False),
                 tc(4, "c", "r4", found_nothing)])
    assert [j.neutral for j in got] == [True, False, False, False]  # first time, success, no empty list
    assert [j.novel_result for j in got] == [False, False, False, True]


def test_the_switches_hide_what_they_turn_off() -> None:
    calls = [tc(1, "a", "r1", items(1, 2)), tc(2, "b", "r2", items(2, 1))]
    assert [j.novel_result for j in judge(calls)] == [True, False]
    off = policy_from_mapping({"equivalence": {"items": False}})
    assert [j.novel_result for j in judge(calls, off)] == [True, True]  # digests alone: a new answer


def test_calls_without_equivalence_are_judged_as_before() -> None:
    plain = Equivalence()
    got = judge([tc(1, "a", "r1", plain), tc(2, "b", "r1", plain), tc(3, "a", "r3", plain)])
    assert [j.novel_result for j in got] == [True, False, True] and not any(j.neutral for j in got)


def test_the_same_request_whose_answer_changed_is_judged_on_all_its_kept_items() -> None:
    sampled_before = items(1 << 58, level=3, count=300)
    seen_small = 1 << 63
    # Another action: an unseen item below the level proves nothing (a sample may have left it out).
    got = judge([tc(1, "a", "r1", sampled_before), tc(2, "b", "r2", items(1 << 58, seen_small))])
    assert [j.novel_result for j in got] == [True, False]
    # The same action asked again, its answer changed: the unseen item is the change.
    got = judge([tc(1, "a", "r1", sampled_before), tc(2, "a", "r2", items(1 << 58, seen_small))])
    assert [j.novel_result for j in got] == [True, True]
    # ... but the same items again in another order (a re-ranked answer) are nothing new.
    got = judge([tc(1, "a", "r1", items(5, 6)), tc(2, "a", "r2", items(6, 5))])
    assert [j.novel_result for j in got] == [True, False]


def test_the_same_request_whose_sampled_answer_changed_is_new() -> None:
    """A long answer's sample may not show the changed line: the change itself is news."""
    got = judge([tc(1, "a", "r1", items(1 << 58, level=3, count=300)),
                 tc(2, "a", "r2", items(1 << 58, level=3, count=300))])
    assert [j.novel_result for j in got] == [True, True]
