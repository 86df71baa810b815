"""Progress judgement: declared rules, result novelty, volatile fields, never output size.

Asserted on the Judgement Run.observe_judged returns, and on the detector that
consumes it (`repeat` resets on progress, `no_progress` on new information).
"""

from __future__ import annotations


from .helpers import NO_BUDGETS, Harness, briefs


def progressed(h: Harness) -> list[bool]:
    return [j.progressed for j in h.judgements]


def novel(h: Harness) -> list[bool]:
    return [j.novel_result for j in h.judgements]


def tool_policy(tool: str, **rule: object) -> dict:
    return {"budget": NO_BUDGETS, "tools": {tool: rule}}


# ---- version_field -----------------------------------------------------------------


def test_version_increase_is_progress_and_equal_or_lower_is_not() -> None:
    h = Harness(tool_policy("lookup", progress={"version_field": "version"}))
    for v in (7, 7, 8, 6, 6, 8.5):
        h.call("lookup", {"id": 1}, {"status": "pending", "version": v})
    assert progressed(h) == [True, False, True, False, False, True]


def test_a_flapping_version_is_not_progress() -> None:
    # A stale replica answering 7, 8, 7, 8 never goes above the highest version seen.
    h = Harness(tool_policy("lookup", progress={"version_field": "version"}))
    for v in (7, 8, 7, 8, 7, 8):
        h.call("lookup", {"id": 1}, {"status": "pending", "version": v})
    assert progressed(h) == [True, True, False, False, False, False]
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 2, 4, 3), ("repeat", "stop", 2, 6, 5)]


def test_version_read_from_a_dotted_path() -> None:
    h = Harness(tool_policy("lookup", progress={"version_field": "meta.version"}))
    for v in (1, 1, 2):
        h.call("lookup", {"id": 1}, {"meta": {"version": v}})
    assert progressed(h) == [True, False, True]


def test_declared_rule_replaces_digest_novelty_for_repeat() -> None:
    # Only the declared field counts: a changing ETA is new output but not progress.
    h = Harness(tool_policy("lookup", progress={"version_field": "version"}))
    for eta in ("mon", "tue", "wed"):
        h.call("lookup", {"id": 1}, {"version": 7, "eta": eta})
    assert progressed(h) == [True, False, False]
    assert novel(h) == [True, True, True]
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3)]
    assert h.kind("no_progress") == []  # each result was new information


def test_version_that_is_not_a_number_is_ignored() -> None:
    h = Harness(tool_policy("lookup", progress={"version_field": "version"}))
    for v in ("1", "2", True):
        h.call("lookup", {"id": 1}, {"version": v})
    assert progressed(h) == [True, False, False]


# ---- state_field / terminal_states -------------------------------------------------------


def test_state_change_is_progress_and_terminal_is_reported() -> None:
    h = Harness(tool_policy("export", progress={"state_field": "state", "terminal_states": ["complete", "failed"]}))
    for state in ("queued", "running", "running", "complete", "complete"):
        h.call("export", {"job": 9}, {"state": state})
    assert progressed(h) == [True, True, False, True, False]
    assert [j.terminal for j in h.judgements] == [False, False, False, True, True]


def test_unchanged_state_after_terminal_repeats() -> None:
    h = Harness(tool_policy("export", progress={"state_field": "state", "terminal_states": ["complete"]}))
    for state in ("running", "complete", "complete", "complete"):
        h.call("export", {"job": 9}, {"state": state})
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 2, 4, 3)]


# ---- cursor_field + items_field ---------------------------------------------------------------


SEARCH = tool_policy("search", progress={"cursor_field": "cursor", "items_field": "items", "item_id_field": "case_id"})


def page(*ids: int, next_cursor: object = None) -> dict:
    return {"items": [{"case_id": i, "title": f"case {i}"} for i in ids], "next": next_cursor}


def test_new_cursor_with_unseen_items_is_progress() -> None:
    h = Harness(SEARCH)
    h.call("search", {"q": "refund", "cursor": None}, page(1, 2, next_cursor="c2"))
    h.call("search", {"q": "refund", "cursor": "c2"}, page(3, 4, 5))
    assert h.calls[0].action != h.calls[1].action  # the cursor is part of the action
    assert [j.new_items for j in h.judgements] == [2, 3]
    assert progressed(h) == [True, True]
    assert h.findings == []


def test_same_page_again_brings_no_new_items() -> None:
    h = Harness(SEARCH)
    for _ in range(3):
        h.call("search", {"q": "refund", "cursor": "c2"}, page(3, 4))
    assert [j.new_items for j in h.judgements] == [2, 0, 0]
    assert progressed(h) == [True, False, False]
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3)]


def test_same_action_returning_unseen_items_is_progress() -> None:
    h = Harness(SEARCH)
    for ids in ((1, 2), (1, 2), (1, 2, 3)):
        h.call("search", {"q": "latest", "cursor": None}, page(*ids))
    assert [j.new_items for j in h.judgements] == [2, 0, 1]
    assert progressed(h) == [True, False, True]


def test_a_first_call_with_exactly_one_unseen_item_is_progress() -> None:
    """One new item is enough, on a first call as on a later one."""
    h = Harness(SEARCH)
    h.call("search", {"q": "one", "cursor": None}, page(7))
    h.call("search", {"q": "one", "cursor": None}, page(7, 8))
    assert [j.new_items for j in h.judgements] == [1, 1]
    assert progressed(h) == [True, True]
    # Negative control: a first call whose only item was already seen is not progress.
    h.call("search", {"q": "two", "cursor": None}, page(8))
    assert (h.judgements[2].new_items, progressed(h)[2]) == (0, False)


def test_plain_item_ids_and_default_id_field() -> None:
    h = Harness(tool_policy("list", progress={"items_field": "data"}))
    h.call("list", {"p": 1}, {"data": [{"id": "a"}, {"id": "b"}]})
    h.call("list", {"p": 1}, {"data": ["c", "a"]})
    assert [j.new_items for j in h.judgements] == [2, 1]


def test_new_cursor_with_only_seen_items_is_not_progress() -> None:
    # A new cursor is a new action, but only unseen item ids are progress.
    h = Harness(SEARCH)
    h.call("search", {"q": "refund", "cursor": None}, page(1, 2, next_cursor="c2"))
    h.call("search", {"q": "refund", "cursor": "c2"}, page(1, 2, next_cursor="c2"))
    assert h.judgements[1].new_items == 0 and not h.judgements[1].novel_result
    assert progressed(h) == [True, False]


# ---- errors_field -------------------------------------------------------------------------------


def test_fewer_validation_errors_is_progress() -> None:
    h = Harness(tool_policy("validate", progress={"errors_field": "errors"}))
    for errors in (["a", "b", "c"], ["a", "b"], ["x", "y"], ["a", "b", "c"], []):
        h.call("validate", {"doc": 1}, {"errors": errors})
    assert progressed(h) == [True, True, False, False, True]


def test_error_count_as_a_number() -> None:
    h = Harness(tool_policy("validate", progress={"errors_field": "report.error_count"}))
    for n in (5, 5, 4, 4):
        h.call("validate", {"doc": 1}, {"report": {"error_count": n}})
    assert progressed(h) == [True, False, True, False]


def test_same_error_count_repeats_then_a_fix_resets() -> None:
    h = Harness(tool_policy("validate", progress={"errors_field": "errors"}))
    results = [{"errors": ["e1", "e2"]}] * 3 + [{"errors": ["e1"]}] + [{"errors": ["e1"]}] * 2
    h.feed([("validate", {"doc": 1}, r) for r in results])
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3), ("repeat", "warn", 4, 6, 3)]


# ---- default rule: a result digest never seen before in the run ----------------------------


def test_default_rule_is_an_unseen_result_digest() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for r in ("a", "b", "a", "c", "b"):
        h.call("t", {"x": 1}, r)
    assert progressed(h) == [True, True, False, True, False]
    assert novel(h) == progressed(h)


def test_a_result_seen_from_another_tool_is_not_new() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.call("a", {}, {"rows": []})
    h.call("b", {}, {"rows": []})
    assert novel(h) == [True, False]


def test_volatile_result_fields_do_not_make_a_result_new() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for i in range(3):
        h.call("lookup", {"id": 1}, {"status": "ok", "request_id": f"r{i}", "timestamp": 1000 + i,
                                     "meta": {"trace_id": f"t{i}", "nonce": i, "created_at": i}})
    assert len({c.result for c in h.calls}) == 1
    assert novel(h) == [True, False, False]
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3)]


def test_non_volatile_field_change_is_new() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for i in range(3):
        h.call("lookup", {"id": 1}, {"status": "ok", "request_id": "same", "seq_no": i})
    assert novel(h) == [True, True, True]
    assert h.kind("repeat") == []


def test_per_tool_volatile_fields_replace_the_global_set() -> None:
    h = Harness({"budget": NO_BUDGETS, "tools": {"lookup": {"result_volatile_fields": ["etag"]}}})
    h.call("lookup", {"id": 1}, {"status": "ok", "etag": "e1", "request_id": "r1"})
    h.call("lookup", {"id": 1}, {"status": "ok", "etag": "e2", "request_id": "r1"})
    h.call("lookup", {"id": 1}, {"status": "ok", "etag": "e2", "request_id": "r2"})
    assert novel(h) == [True, False, True]


# ---- output size is never a signal ----------------------------------------------------------


def test_two_different_results_of_the_same_length_are_both_new() -> None:
    a, b = '{"status":"failed"}', '{"status":"passed"}'
    assert len(a) == len(b)
    h = Harness({"budget": NO_BUDGETS})
    for r in (a, b, a, b):
        h.call("check", {"id": 1}, r)
    assert novel(h) == [True, True, False, False]
    assert h.calls[0].result != h.calls[1].result


def test_identical_content_is_not_new_whatever_its_length() -> None:
    h = Harness({"budget": NO_BUDGETS})
    big = {"rows": ["x" * 500] * 20}
    for _ in range(3):
        h.call("check", {"id": 1}, big)
    assert novel(h) == [True, False, False]
    assert briefs(h.findings, "repeat") == [("repeat", "warn", 1, 3, 3)]


def test_an_error_count_given_as_a_boolean_is_no_count() -> None:
    """`true`/`false` are not 1 and 0 errors: going from one to the other is no progress."""
    h = Harness(tool_policy("validate", progress={"errors_field": "errors"}))
    for errors in (True, False, True, False):
        h.call("validate", {"doc": 1}, {"errors": errors})
    assert progressed(h) == [True, False, False, False]
    # Positive control: numbers are counts.
    h = Harness(tool_policy("validate", progress={"errors_field": "errors"}))
    for errors in (1, 0):
        h.call("validate", {"doc": 1}, {"errors": errors})
    assert progressed(h) == [True, True]


def test_an_item_id_that_is_an_object_is_the_same_item_whatever_its_key_order() -> None:
    h = Harness(tool_policy("list", progress={"items_field": "data"}))
    h.call("list", {"p": 1}, {"data": [{"id": {"shard": 1, "row": 7}}]})
    h.call("list", {"p": 2}, '{"data": [{"id": {"row": 7, "shard": 1}}]}')
    h.call("list", {"p": 3}, {"data": [{"id": {"row": 8, "shard": 1}}]})  # positive control
    assert [j.new_items for j in h.judgements] == [1, 0, 1]


def test_a_state_that_is_an_object_changes_when_its_content_does() -> None:
    h = Harness(tool_policy("job", progress={"state_field": "state"}))
    for state in ({"phase": "copy", "pct": 10}, {"pct": 10, "phase": "copy"}, {"phase": "copy", "pct": 20}):
        h.call("job", {"id": 1}, {"state": state})
    assert progressed(h) == [True, False, True]
