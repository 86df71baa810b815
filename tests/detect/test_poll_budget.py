"""`poll_budget`: a declared poller's total polls and deadline, apart from progress."""

from __future__ import annotations

import pytest

from .helpers import NO_BUDGETS, SEC, T0, Harness, brief, briefs, feed, spans

TOOL = "get_export_status"


def poll_policy(**poll: object) -> dict:
    return {
        "budget": NO_BUDGETS,
        "tools": {
            TOOL: {
                "poll": poll or {"max_polls": 5},
                "progress": {"state_field": "state", "terminal_states": ["complete", "failed"]},
            }
        },
    }


def polls(*states: str, job: int = 1) -> list[tuple]:
    return [(TOOL, {"export_id": job}, {"state": s}) for s in states]


def test_polling_with_progress_still_exhausts_the_budget() -> None:
    h = Harness(poll_policy(max_polls=5))
    h.feed(polls("queued", "step 1", "step 2", "step 3", "step 4", "step 5"))
    assert all(j.progressed for j in h.judgements)
    assert h.kind("repeat") == []  # progress every time: not a repeat
    warn, stop = h.kind("poll_budget")
    assert brief(warn) == ("poll_budget", "warn", 1, 4, 4) and h.fired_at(warn) == 4
    assert brief(stop) == ("poll_budget", "stop", 1, 5, 5) and h.fired_at(stop) == 5
    assert stop.seqs == (1, 5) and stop.span_ids == spans(1, 5)  # first and last poll
    assert stop.tool == TOOL and stop.action == h.calls[0].action
    assert stop.reason == f"{TOOL} polled 5 times without reaching a terminal state (budget 5 polls)"
    assert len(h.kind("poll_budget")) == 2


def test_polls_below_the_warn_level_are_quiet() -> None:
    assert feed(polls("a", "b", "c"), poll_policy(max_polls=5)) == []


def test_reaching_a_terminal_state_resets_the_episode() -> None:
    steps = polls("queued", "running", "complete") + polls("queued", "running", "running 2")
    assert feed(steps, poll_policy(max_polls=5)) == []
    # Positive control: the same six polls without the terminal state in between.
    steps = polls("queued", "running", "running 1") + polls("queued", "running", "running 2")
    assert briefs(feed(steps, poll_policy(max_polls=5)), "poll_budget") == [
        ("poll_budget", "warn", 1, 4, 4),
        ("poll_budget", "stop", 1, 5, 5),
    ]


def test_a_new_episode_counts_from_its_own_first_poll() -> None:
    steps = polls("queued", "complete") + polls("a", "b", "c", "d", "e")
    assert briefs(feed(steps, poll_policy(max_polls=5)), "poll_budget") == [
        ("poll_budget", "warn", 3, 6, 4),
        ("poll_budget", "stop", 3, 7, 5),
    ]


@pytest.mark.parametrize("states", [("a", "b", "c", "complete"), ("a", "b", "c", "d", "complete")])
def test_the_poll_that_reaches_terminal_state_is_not_a_finding(states: tuple) -> None:
    h = Harness(poll_policy(max_polls=5))
    h.feed(polls(*states[:-1]))
    assert h.call(*polls(states[-1])[0]) == []


def test_each_polled_resource_has_its_own_episode() -> None:
    steps = []
    for i in range(3):
        steps += polls(f"a{i}", job=1) + polls(f"b{i}", job=2)
    assert feed(steps, poll_policy(max_polls=5)) == []


def timed_poll(h: Harness, state: str, start_s: float, end_s: float) -> list:
    return h.call(TOOL, {"export_id": 1}, {"state": state}, start_ns=T0 + int(start_s * SEC), end_ns=T0 + int(end_s * SEC))


def test_deadline_stops_once_from_the_first_poll_start() -> None:
    h = Harness(poll_policy(max_polls=None, deadline_seconds=60))
    assert timed_poll(h, "queued", 0, 1) == []
    assert timed_poll(h, "running", 30, 31) == []
    assert timed_poll(h, "running 2", 58, 59.5) == []
    (stop,) = timed_poll(h, "running 3", 59.5, 61)
    assert brief(stop) == ("poll_budget", "stop", 1, 4, 4) and stop.seqs == (1, 4)
    assert stop.reason == f"{TOOL} kept polling for 61.0s, past its 60s deadline"
    assert timed_poll(h, "running 4", 90, 91) == []


def test_deadline_restarts_with_the_episode() -> None:
    h = Harness(poll_policy(max_polls=None, deadline_seconds=60))
    timed_poll(h, "queued", 0, 1)
    timed_poll(h, "complete", 50, 51)
    assert timed_poll(h, "queued", 55, 56) == []
    assert timed_poll(h, "running", 100, 114) == []  # 59s after this episode began
    assert len(timed_poll(h, "running 2", 114, 116)) == 1


def test_polls_without_timestamps_never_reach_the_deadline() -> None:
    assert feed(polls(*[f"s{i}" for i in range(10)]), poll_policy(max_polls=None, deadline_seconds=1)) == []


def test_pollers_do_not_feed_no_progress() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {TOOL: {"exempt_repeat": True, "poll": {"max_polls": 50}}}}
    h = Harness(pol)
    h.feed(polls(*["running"] * 12))
    assert h.findings == []
    # Negative control: the same exempt tool without a poll rule is no_progress's business.
    pol = {"budget": NO_BUDGETS, "tools": {TOOL: {"exempt_repeat": True}}}
    assert briefs(feed(polls(*["running"] * 7), pol)) == [
        ("no_progress", "warn", 2, 4, 3),
        ("no_progress", "stop", 2, 7, 6),
    ]


def test_one_poll_past_the_deadline_is_its_own_only_evidence() -> None:
    h = Harness(poll_policy(max_polls=None, deadline_seconds=60))
    (stop,) = timed_poll(h, "queued", 0, 61)
    assert brief(stop) == ("poll_budget", "stop", 1, 1, 1) and stop.seqs == (1,)


def test_a_poll_ending_exactly_at_the_deadline_has_reached_it() -> None:
    h = Harness(poll_policy(max_polls=None, deadline_seconds=60))
    assert timed_poll(h, "queued", 0, 1) == []
    assert briefs(timed_poll(h, "running", 59, 60)) == [("poll_budget", "stop", 1, 2, 2)]


def _poll_previews(h: Harness, job: int = 1) -> list[tuple[str, str]]:
    call = h.fingerprint(TOOL, {"export_id": job}, None)
    return [(level, reason) for level, kind, reason in h.run.preview(call) if kind == "poll_budget"]


def test_preview_tells_a_poll_where_it_stands_from_its_first_poll_on() -> None:
    h = Harness(poll_policy(max_polls=1))
    # no poll of this episode yet: the first is also the last one allowed
    assert _poll_previews(h) == [("warn", f"this is poll 1 of the 1 {TOOL} may make without reaching a terminal state")]
    quiet = Harness(poll_policy(max_polls=10))
    assert _poll_previews(quiet) == []  # the negative control: far from the budget
