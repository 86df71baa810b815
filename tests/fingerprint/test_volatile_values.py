"""Values shaped like generated ids or clock readings (canon/volatile.py): masked in the
result digest, at any depth and under any key, never as keys or parts of longer text; the
exact digest kept beside it; every fingerprint path agreeing. Unit and property tests, each
way: such a difference is no difference, and any other difference still is one."""

from __future__ import annotations

import datetime

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.canon.volatile import MASK, Masker, plain_mask
from otel_loopguard.policy import policy_from_mapping

KEY = load_key(key=b"v" * 32)
FP = Fingerprinter(KEY, policy_from_mapping({}))
RULE = FP.policy.rule("t")


def canon(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digests(value: object, fp: Fingerprinter = FP, tool: str = "t") -> tuple[str, str | None]:
    digest, _, exact = fp.result_digests(tool, fp.policy.rule(tool), value)
    return digest, exact


VOLATILE = [
    "550e8400-e29b-41d4-a716-446655440000",  # UUID
    "550E8400-E29B-41D4-A716-446655440000",
    "msg_550e8400-e29b-41d4-a716-446655440000",  # prefixed
    "01HZX3K5W8Q9R2T4V6Y8A0C2E4",  # ULID
    "5f9c3b2a1e4d6c7b8a9f0e1d",  # 24 hex (a Mongo ObjectId)
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",  # 40 hex
    "dGhpcyBpcyBhIHRlc3Q0MjQy",  # base64
    "Xk3_pQ9-zL2mN8vR4tY6wB1c",  # base64url
    "2026-12-02T01:02:03Z",  # ISO-8601 date-times
    "2026-12-02T01:02:03.123456+00:00",
    "2026-12-02 01:02",
    "1764637323",  # epoch seconds, as text
]
VOLATILE_NUMBERS = [1764637323, 1764637323.25, 1764637323123, 1764637323123456, 1764637323123456789]
KEPT = [
    "2026-12-02",  # a date alone is business data
    "pneumonoultramicroscopicsilicovolcano",  # a long word
    "ALL_CAPS_SETTING_NAME_WITH_NO_DIGIT",
    "abc123",  # short
    "5f9c3b2a1e4d6c7b8a9f0e",  # 22 hex: too short for an id
    "2026-12-02T01:02:03Z GET /orders 200",  # a log line: text around the time
    "/out/run-7/part-0001.json",
    "/out/Batch7/part-550e8400e29b41d4a716446655440000",  # a path echoed back, not an id
    "delivered",
    "550e8400-e29b-41d4-a716",  # a UUID's prefix
    "Tue, 02 Dec 2026 01:02:03 GMT",  # RFC 1123 dates are not among the shapes
]
KEPT_NUMBERS = [7, 2026, 999999999, 1234567890123456789012, 17646373231]


@pytest.mark.parametrize("value", VOLATILE + VOLATILE_NUMBERS)
@pytest.mark.parametrize("where", ["value", "nested", "array"])
def test_volatile_shapes_are_masked_wherever_they_sit(value: object, where: str) -> None:
    doc = {"a": value} if where == "value" else {"x": {"y": [1, {"z": value}]}} if where == "nested" else [value, 1]
    masked = Masker().text(canon(doc))
    assert masked is not None and MASK in masked
    assert json.dumps(value) not in masked


@pytest.mark.parametrize("value", KEPT + KEPT_NUMBERS)
def test_other_values_are_left_alone(value: object) -> None:
    assert Masker().text(canon({"a": value, "b": [value]})) is None


def test_keys_are_never_masked() -> None:
    assert Masker().text(canon({"550e8400-e29b-41d4-a716-446655440000": 1})) is None


def test_a_string_that_only_contains_an_escaped_quote_and_a_time_is_not_split() -> None:
    assert Masker().text(canon({"s": 'say "2026-12-02T01:02:03Z"'})) is None
    assert Masker().text(canon({"s": 'x","2026-12-02T01:02:03Z'})) is None


def test_meaningful_keys_keep_their_values_at_any_depth_and_others_are_masked() -> None:
    text = canon({"id": str(uuid.uuid4()), "at": "2026-12-02T01:02:03Z", "ticket": {"id": str(uuid.uuid4())}})
    masked = Masker(["id"]).text(text)
    assert masked is not None and masked.count(MASK) == 1  # only "at"
    assert Masker(["id", "at"]).text(text) is None


# --- the reported case, digest level --------------------------------------------------------


def reader_payload(n: int) -> dict:
    return {"messages": [], "messageId": str(uuid.UUID(int=n * 7919 + 1, version=4)),
            "fetchedAt": f"2026-12-02T01:{n % 60:02d}:00Z"}


@pytest.mark.parametrize("form", ["dict", "text"])
def test_payloads_differing_only_in_id_and_time_share_the_digest_and_keep_exact_ones_apart(form: str) -> None:
    a, b = reader_payload(1), reader_payload(2)
    if form == "text":
        a, b = json.dumps(a), json.dumps(b)  # type: ignore[assignment]
    (da, ea), (db, eb) = digests(a), digests(b)
    assert da == db
    assert ea is not None and eb is not None and ea != eb and da not in (ea, eb)


def test_a_real_change_still_changes_the_digest() -> None:
    a, b = reader_payload(1), {**reader_payload(2), "messages": [{"text": "hello"}]}
    assert digests(a)[0] != digests(b)[0]


def test_without_volatile_values_nothing_is_masked_and_no_exact_digest_is_given() -> None:
    off = Fingerprinter(KEY, policy_from_mapping({"volatile_values": False}))
    assert digests(reader_payload(1), off)[0] != digests(reader_payload(2), off)[0]
    assert digests(reader_payload(1), off)[1] is None
    per_tool = Fingerprinter(KEY, policy_from_mapping({"tools": {"t": {"volatile_values": False}}}))
    assert digests(reader_payload(1), per_tool)[0] != digests(reader_payload(2), per_tool)[0]
    assert digests(reader_payload(1), per_tool, "other")[0] == digests(reader_payload(2), per_tool, "other")[0]


def test_nothing_volatile_means_one_digest_equal_to_the_unmasked_one() -> None:
    value = {"status": "delivered", "version": 7}
    off = Fingerprinter(KEY, policy_from_mapping({"volatile_values": False}))
    assert digests(value) == (digests(value, off)[0], None)


# --- properties -----------------------------------------------------------------------------

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=12))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                    max_leaves=20)
VOLATILE_VALUES = st.one_of(st.uuids().map(str), st.sampled_from(VOLATILE), st.sampled_from(VOLATILE_NUMBERS),
                            st.integers(1_000_000_000, 1_999_999_999),
                            # From year 1000 on (four-digit years); generated there, not moved there: replace(year=...)
                            # of a 29 February fails in a year that is not a leap year.
                            st.datetimes(min_value=datetime.datetime(1000, 1, 1)).map(lambda d: d.isoformat() + "Z"))


def _with(value: object, key: str, extra: object) -> dict:
    return {"payload": value, key: extra}


@settings(max_examples=150, deadline=None)
@given(JSON, st.text(min_size=1, max_size=8), VOLATILE_VALUES, VOLATILE_VALUES)
def test_property_results_differing_only_in_volatile_values_digest_alike(value, key, one, other) -> None:
    assert digests(_with(value, key, one))[0] == digests(_with(value, key, other))[0]


@settings(max_examples=150, deadline=None)
@given(JSON, JSON)
def test_property_results_differing_otherwise_digest_apart(a, b) -> None:
    # Scalars drawn here are short text and small numbers: never id- or time-shaped.
    if canon(a) != canon(b):
        assert digests({"p": a})[0] != digests({"p": b})[0]
    else:
        assert digests({"p": a})[0] == digests({"p": b})[0]


@settings(max_examples=200, deadline=None)
@given(st.one_of(JSON.map(lambda v: {"v": v}), st.builds(_with, JSON, st.text(max_size=6), VOLATILE_VALUES)))
def test_property_every_path_agrees_text_memo_parsed_and_bytes(value) -> None:
    text = json.dumps(value)
    via_value = FP.result_digests("t", RULE, value)
    via_text = FP.result_digests("t", RULE, text)  # memo and the native canonical bytes
    via_full = FP.result_full("t", RULE, value)  # the plain parse-and-serialise path
    assert via_value[0] == via_text[0] == via_full[0]
    assert via_value[2] == via_text[2] == via_full[3]
    assert FP.result_digests("t", RULE, text) == via_text  # served again from the memo
    c = canon(value)
    masked = Masker().text(c)
    assert Masker().data(c.encode("utf-8")) == (None if masked is None else masked.encode("utf-8"))


ID_TEXT = st.one_of(st.sampled_from(VOLATILE + KEPT), st.uuids().map(str), st.text("0123456789abcdefABCDEF-_:T.Z+", min_size=8, max_size=40))


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.one_of(SCALARS, ID_TEXT, st.sampled_from(VOLATILE_NUMBERS + KEPT_NUMBERS)),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(st.one_of(st.text(max_size=6), ID_TEXT), inner, max_size=4)),
                    max_leaves=12))
def test_property_the_candidate_scan_equals_matching_the_shapes_everywhere(value) -> None:
    """The fast path (candidates first) against the plain one (every position tried)."""
    c = canon(value)
    expected = plain_mask(c)
    assert Masker().text(c) == (None if expected == c else expected)
    assert Masker().data(c.encode("utf-8")) == (None if expected == c else expected.encode("utf-8"))


def test_a_meaningful_field_named_beyond_ascii_keeps_its_value() -> None:
    """Its key is matched as canonical text writes it: unescaped."""
    value = "0b7f1c2e-6a4d-4f3b-9c1e-2d5a8b7c6f10"
    text = json.dumps({"ключ": value, "other": value}, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    masker = Masker(["ключ"])
    assert masker.text(text) == '{"other":%s,"ключ":"%s"}' % (MASK, value)
    assert masker.data(text.encode("utf-8")) == masker.text(text).encode("utf-8")


def test_values_after_a_meaningful_field_are_still_masked() -> None:
    kept = "0b7f1c2e-6a4d-4f3b-9c1e-2d5a8b7c6f10"
    text = '{"id":"%s","seen_at":"2026-12-02T04:00:00Z","trace":"%s"}' % (kept, kept)
    assert Masker(["id"]).text(text) == '{"id":"%s","seen_at":%s,"trace":%s}' % (kept, MASK, MASK)
