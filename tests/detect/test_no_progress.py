"""`no_progress`: calls in a row that brought nothing new (drifting repeats)."""

from __future__ import annotations

from .helpers import NO_BUDGETS, Harness, brief, briefs, feed, spans

POL = {"budget": NO_BUDGETS}
NOTHING = {"results": [], "total": 0}


def drifting(n: int, result: object = NOTHING) -> list[tuple]:
    """n searches with different queries that all return the same result."""
    return [("search", {"q": f"query {i}"}, result) for i in range(n)]


def test_drifting_repeats_warn_at_three_and_stop_at_six_stale_calls() -> None:
    h = Harness(POL)
    h.feed(drifting(8))  # call 1 is new, calls 2.. bring nothing new
    warn, stop = h.kind("no_progress")
    assert brief(warn) == ("no_progress", "warn", 2, 4, 3) and h.fired_at(warn) == 4
    assert warn.seqs == (2, 3, 4) and warn.span_ids == spans(2, 3, 4)
    assert brief(stop) == ("no_progress", "stop", 2, 7, 6) and h.fired_at(stop) == 7
    assert stop.seqs == (2, 3, 4, 5, 6, 7)
    assert stop.reason.startswith("6 decisions in a row returned only results already seen")
    assert h.kind("repeat") == []  # every call is a different action
    assert len({c.action for c in h.calls}) == 8


def test_results_alternating_between_two_seen_values_are_stale() -> None:
    steps = drifting(2, "A")[:1] + [("search", {"q": "b"}, "B")]
    steps += [("search", {"q": f"more {i}"}, "A" if i % 2 else "B") for i in range(6)]
    assert briefs(feed(steps, POL), "no_progress") == [
        ("no_progress", "warn", 3, 5, 3),
        ("no_progress", "stop", 3, 8, 6),
    ]


def test_each_result_new_never_fires() -> None:
    steps = [("search", {"q": f"query {i}"}, {"results": [i]}) for i in range(30)]
    assert briefs(feed(steps, POL), "no_progress") == []


def test_a_new_result_resets_the_streak() -> None:
    steps = drifting(3)  # 1 new, 2-3 stale
    steps += [("search", {"q": "other"}, {"results": ["hit"]})]  # 4 new
    steps += [("search", {"q": f"again {i}"}, NOTHING) for i in range(3)]  # 5-7 stale
    assert briefs(feed(steps, POL), "no_progress") == [("no_progress", "warn", 5, 7, 3)]


def test_declared_progress_counts_as_new_information() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"status": {"progress": {"version_field": "v"}}}}
    steps = [("status", {"id": 1}, {"v": 1, "eta": "x"})]
    steps += [("other", {"q": i}, "seen") for i in range(2)]  # first "seen" is new
    steps += [("status", {"id": 1}, {"v": 2, "eta": "x"})]
    steps += [("other", {"q": i + 10}, "seen") for i in range(2)]
    assert briefs(feed(steps, pol), "no_progress") == []


def test_drifting_pages_of_already_seen_items_are_no_progress() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"search": {"progress": {"cursor_field": "cursor", "items_field": "items"}}}}
    same_page = {"items": [{"id": 1}, {"id": 2}]}
    steps = [("search", {"q": "x", "cursor": None if i == 0 else f"c{i}"}, same_page) for i in range(7)]
    assert briefs(feed(steps, pol), "no_progress") == [
        ("no_progress", "warn", 2, 4, 3),
        ("no_progress", "stop", 2, 7, 6),
    ]
    # Negative control: every page brings unseen items.
    steps = [("search", {"q": "x", "cursor": f"c{i}"}, {"items": [{"id": i}]}) for i in range(7)]
    assert briefs(feed(steps, pol), "no_progress") == []


def test_pollers_neither_extend_nor_break_the_streak() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"job_status": {"poll": {"max_polls": 50}}}}
    poll = ("job_status", {"job": 1}, {"state": "running"})
    h = Harness(pol)
    h.feed(drifting(3) + [poll] * 5 + [("search", {"q": "late"}, NOTHING)])
    (warn,) = h.kind("no_progress")
    assert brief(warn) == ("no_progress", "warn", 2, 9, 3)
    assert warn.seqs == (2, 3, 9)


def test_unfinished_calls_are_skipped() -> None:
    h = Harness(POL)
    h.feed(drifting(3))
    h.call("search", {"q": "pending"}, None, ok=None, finished=False)
    h.feed([("search", {"q": "late"}, NOTHING)])
    assert briefs(h.findings, "no_progress") == [("no_progress", "warn", 2, 5, 3)]
    assert h.kind("no_progress")[0].seqs == (2, 3, 5)


def test_custom_thresholds_stop_beats_warn() -> None:
    pol = {"budget": NO_BUDGETS, "no_progress": {"warn_at": 2, "stop_at": 2}}
    assert briefs(feed(drifting(4), pol), "no_progress") == [("no_progress", "stop", 2, 3, 2)]
