"""What a declared progress rule reads from one call (progress/evidence.py), field by field.

`tests/detect/test_progress.py` judges runs with these values; here each value is pinned
down where it is made: which types count, what is left None, how items are bounded.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import pytest

from otel_loopguard.calls import Evidence
from otel_loopguard.policy.model import ProgressRule
from otel_loopguard.progress import extract
from otel_loopguard.progress.evidence import MAX_ITEMS_PER_OBSERVATION, NO_EVIDENCE


def test_no_rule_reads_nothing() -> None:
    assert extract(None, {"page": 2}, {"version": 3, "state": "done"}) is NO_EVIDENCE
    assert NO_EVIDENCE == Evidence()


def test_a_rule_reads_only_the_fields_it_declares() -> None:
    result = {"version": 3, "state": "done", "items": [{"id": 1}], "errors": [1, 2]}
    assert extract(ProgressRule(), {"page": 2}, result) == Evidence()
    assert extract(ProgressRule(version_field="version"), {}, result) == Evidence(version=3.0)
    assert extract(ProgressRule(errors_field="errors"), {}, result) == Evidence(error_count=2)


@pytest.mark.parametrize(("value", "version"), [
    (3, 3.0), (2.5, 2.5), (0, 0.0), (-1, -1.0), (True, None), (False, None), ("3", None), (None, None), ([3], None),
])
def test_a_version_is_a_number_and_never_a_boolean(value: Any, version: Any) -> None:
    got = extract(ProgressRule(version_field="meta.version"), {}, {"meta": {"version": value}}).version
    assert got == version and type(got) is type(version)


def test_a_missing_version_path_is_none() -> None:
    assert extract(ProgressRule(version_field="meta.version"), {}, {"meta": {}}).version is None
    assert extract(ProgressRule(version_field="meta.version"), {}, "not an object").version is None


def test_a_state_is_its_text_or_its_json_with_sorted_keys() -> None:
    rule = ProgressRule(state_field="job.state", terminal_states=("done", '{"code": 1, "ok": true}'))
    assert extract(rule, {}, {"job": {"state": "running"}}) == Evidence(state="running", terminal=False)
    assert extract(rule, {}, {"job": {"state": "done"}}) == Evidence(state="done", terminal=True)
    # a structured state: JSON text with sorted keys, so key order is no change of state
    structured = extract(rule, {}, {"job": {"state": {"ok": True, "code": 1}}})
    assert structured == Evidence(state='{"code": 1, "ok": true}', terminal=True)
    assert extract(rule, {}, {"job": {"state": 7}}).state == "7"
    assert extract(rule, {}, {"job": {}}) == Evidence(state=None, terminal=False)
    assert extract(rule, {}, {"job": {"state": None}}) == Evidence(state=None, terminal=False)


def test_no_state_is_never_terminal_even_when_none_is_listed() -> None:
    rule = ProgressRule(state_field="state", terminal_states=("null", "None"))
    assert extract(rule, {}, {"other": 1}).terminal is False
    # without a state field no state is read, whatever the result holds
    assert extract(ProgressRule(version_field="v", terminal_states=("done",)), {}, {"state": "done", "v": 1}).state is None


def _hash(v: Any) -> int:
    return int.from_bytes(hashlib.blake2b(json.dumps(v, sort_keys=True).encode(), digest_size=8).digest(), "big")


def test_item_ids_are_stable_64_bit_hashes_of_each_items_id() -> None:
    rule = ProgressRule(items_field="data.items")
    ev = extract(rule, {}, {"data": {"items": [{"id": 7}, {"id": "a"}, {"name": "no id"}, {"id": None}, "bare", 7]}})
    assert ev.item_ids == (_hash(7), _hash("a"), _hash("bare"), _hash(7))
    assert all(0 <= i < 2**64 for i in ev.item_ids)
    # an id that is an object: the same whatever its key order
    a = extract(rule, {}, {"data": {"items": [{"id": {"shard": 1, "n": 2}}]}}).item_ids
    b = extract(rule, {}, {"data": {"items": [{"id": {"n": 2, "shard": 1}}]}}).item_ids
    assert a == b and len(a) == 1
    assert extract(ProgressRule(items_field="items", item_id_field="key"), {},
                   {"items": [{"key": 1, "id": 2}]}).item_ids == (_hash(1),)


def test_ids_that_are_not_json_are_hashed_by_their_text() -> None:
    # a result handed over in process, not parsed from text, may hold any object
    when = dt.datetime(2026, 12, 2, 4, 0)
    ev = extract(ProgressRule(items_field="items"), {}, {"items": [{"id": when}, {"id": str(when)}]})
    assert ev.item_ids[0] == ev.item_ids[1]


def test_items_that_are_not_a_list_give_no_ids() -> None:
    rule = ProgressRule(items_field="items")
    assert extract(rule, {}, {"items": {"id": 1}}).item_ids == ()
    assert extract(rule, {}, {"items": "1,2"}).item_ids == ()
    assert extract(rule, {}, {}).item_ids == ()
    assert extract(ProgressRule(state_field="s"), {}, {"items": [{"id": 1}]}).item_ids == ()


def test_items_are_read_up_to_the_bound() -> None:
    n = MAX_ITEMS_PER_OBSERVATION
    ev = extract(ProgressRule(items_field="items"), {}, {"items": [{"id": i} for i in range(n + 5)]})
    assert len(ev.item_ids) == n
    assert ev.item_ids[-1] == _hash(n - 1)


@pytest.mark.parametrize(("value", "count"), [
    ([1, 2, 3], 3), ([], 0), (4, 4), (0, 0), (True, None), (False, None), ("3", None), (2.0, None), (None, None),
])
def test_an_error_count_is_a_list_length_or_an_integer(value: Any, count: Any) -> None:
    got = extract(ProgressRule(errors_field="status.errors"), {}, {"status": {"errors": value}}).error_count
    assert got == count and type(got) is type(count)
