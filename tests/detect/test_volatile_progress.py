"""Progress and new information when results carry id- and time-shaped values (docs/policy.md,
"Progress"): the same answer with a fresh id is nothing new for the same action; a new page of
ids for another action is."""

from __future__ import annotations

import uuid

from .helpers import NO_BUDGETS, Harness


def uid(n: int) -> str:
    return str(uuid.UUID(int=n * 2654435761 + 12345, version=4))


def reader(n: int) -> dict:
    return {"messages": [], "messageId": uid(n), "fetchedAt": f"2026-12-02T01:00:{n:02d}Z"}


def test_the_same_action_answered_with_a_fresh_id_is_neither_progress_nor_new() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for n in range(4):
        h.call("read_messages", {"channel": "ops"}, reader(n))
    assert [(j.progressed, j.novel_result) for j in h.judgements] == [(True, True)] + [(False, False)] * 3
    assert h.run.summary.new_items_observed is False


def test_other_actions_with_pages_of_new_ids_are_new_each_time() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for n in range(4):
        h.call("list_messages", {"cursor": n}, {"items": [{"id": uid(100 + n)}]})
    assert [j.novel_result for j in h.judgements] == [True] * 4
    assert h.run.summary.new_items_observed is True  # every page masks alike, yet each is new
    assert h.findings == []


def test_an_exact_answer_seen_before_is_not_new_for_another_action_either() -> None:
    h = Harness({"budget": NO_BUDGETS})
    page = {"items": [{"id": uid(7)}]}
    h.call("list_messages", {"cursor": 1}, page)
    h.call("list_messages", {"cursor": 2}, page)
    assert [j.novel_result for j in h.judgements] == [True, False]


def test_the_loop_stops_by_call_8_and_new_content_with_fresh_ids_never_warns() -> None:
    loop = Harness({"budget": NO_BUDGETS})
    for n in range(8):
        loop.call("read_messages", {"channel": "ops"}, reader(n))
    stops = [f for f in loop.findings if f.severity == "stop"]
    assert stops and min(f.last_seq for f in stops) <= 8
    work = Harness({"budget": NO_BUDGETS})
    for n in range(8):
        work.call("read_messages", {"channel": "ops"}, {**reader(n), "messages": [{"text": f"m{n}"}]})
    assert work.findings == []
