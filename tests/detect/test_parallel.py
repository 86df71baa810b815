"""Siblings of one decision: `parallel_duplicate` (info), never `repeat`; repeat counts decisions."""

from __future__ import annotations


from .helpers import NO_BUDGETS, Harness, brief, briefs, feed, spans

POL = {"budget": NO_BUDGETS}
READ = ("read_file", {"path": "README.md"}, "# readme")


def sibling(step: tuple, turn: int) -> tuple:
    return (*step[:3], turn)


def test_identical_siblings_are_a_parallel_duplicate_not_a_repeat() -> None:
    h = Harness(POL)
    h.feed([sibling(READ, 1)] * 3)
    (dup,) = h.findings
    assert brief(dup) == ("parallel_duplicate", "info", 1, 2, 2)
    assert dup.seqs == (1, 2) and dup.span_ids == spans(1, 2)
    assert dup.tool == "read_file" and dup.action == h.calls[0].action
    assert dup.reason == "one decision requested read_file twice with the same arguments in parallel"


def test_different_siblings_are_not_duplicates() -> None:
    steps = [("read_file", {"path": f"f{i}"}, f"text {i}", 1) for i in range(4)]
    assert feed(steps, POL) == []


def test_the_same_calls_without_turns_are_a_sequence() -> None:
    h = Harness(POL)
    h.feed([READ] * 3)
    assert briefs(h.findings) == [("repeat", "warn", 1, 3, 3)]


def test_a_duplicate_pair_over_three_turns_counts_three_decisions() -> None:
    h = Harness(POL)
    for turn in (1, 2, 3):
        h.feed([sibling(READ, turn)] * 2)
    (warn,) = h.kind("repeat")
    assert brief(warn) == ("repeat", "warn", 1, 5, 3) and warn.seqs == (1, 3, 5)
    assert h.fired_at(warn) == 5
    assert briefs(h.findings, "parallel_duplicate") == [
        ("parallel_duplicate", "info", 1, 2, 2),
        ("parallel_duplicate", "info", 3, 4, 2),
        ("parallel_duplicate", "info", 5, 6, 2),
    ]


def test_a_duplicate_pair_over_five_turns_stops_at_the_fifth_decision() -> None:
    h = Harness(POL)
    for turn in range(1, 6):
        h.feed([sibling(READ, turn)] * 2)
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 5, 3), ("repeat", "stop", 1, 9, 5)]
    assert h.kind("repeat")[1].seqs == (1, 3, 5, 7, 9)


def test_a_decision_that_also_requests_other_calls_continues_the_streak() -> None:
    h = Harness(POL)
    for turn in (1, 2, 3):
        h.feed([sibling(READ, turn), ("grep", {"turn": turn}, f"hits {turn}", turn)])
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 5, 3)]


def test_siblings_in_window_mode_count_once_per_decision() -> None:
    pol = {"budget": NO_BUDGETS, "repeat": {"mode": "window"}}
    h = Harness(pol)
    for turn in (1, 2, 3):
        h.feed([sibling(READ, turn)] * 2)
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 5, 3)]


def test_identical_failed_siblings_are_one_failing_decision() -> None:
    h = Harness(POL)
    h.feed([("fetch", {"u": 1}, {"error": "503"}, 1, False)] * 3)
    assert h.kind("error_streak") == []
    assert briefs(h.findings, "parallel_duplicate") == [("parallel_duplicate", "info", 1, 2, 2)]


def test_identical_siblings_of_one_decision_are_not_a_no_progress_loop() -> None:
    h = Harness(POL)
    h.feed([sibling(READ, 1)] * 4)
    assert h.kinds() == {"parallel_duplicate"}
