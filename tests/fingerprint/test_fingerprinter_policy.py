"""The Fingerprinter under a policy: only the normalisation a tool declares."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from otel_loopguard.calls import RawCall
from otel_loopguard.canon import DigestKey
from otel_loopguard.fingerprint import Fingerprint, Fingerprinter, fingerprint_call
from otel_loopguard.canon.canonical import DOUBLE_ENCODED, OPAQUE_TEXT
from otel_loopguard.policy import Policy, policy_from_mapping
from otel_loopguard.policy.model import DEFAULT_RESULT_VOLATILE

KEY = DigestKey(b"fingerprinter-test-key-0123456789", "test")

POLICY = policy_from_mapping(
    {
        "tools": {
            "search": {
                "ignore_fields": ["debug", "meta.trace"],
                "defaults": {"limit": 10, "exact": False, "options.page_size": 20, "mode": "fast", "score": 1},
            },
            "lookup_order": {"identity_fields": ["tenant", "user"]},
            "get_status": {"result_volatile_fields": ["etag", "served_by"]},
            "raw_status": {"result_volatile_fields": []},
            "issue_refund": {"idempotency_key": "idempotency_key", "identity_fields": ["tenant"]},
            "send_email": {"side_effect": True, "idempotency_key": "meta.dedupe_id"},
            "delete_file": {"side_effect": True},
        }
    }
)
FP = Fingerprinter(KEY, POLICY)


def act(tool: str, args: Any, identity: Any = None) -> str:
    return FP.action(tool, args, identity).digest


def res(tool: str, value: Any) -> str:
    return FP.result(tool, value).digest


def test_fingerprint_carries_digest_flags_and_value() -> None:
    fp = FP.action("anything", '"{\\"b\\": 1}"')
    assert isinstance(fp, Fingerprint)
    assert re.fullmatch(r"[0-9a-f]{32}", fp.digest)
    assert fp.flags == {DOUBLE_ENCODED}
    assert fp.value == {"b": 1}
    assert FP.key_id == "test"
    opaque = FP.action("anything", "{'a': 1}")
    assert opaque.flags == {OPAQUE_TEXT}
    assert opaque.value == "{'a': 1}"


def test_json_text_and_parsed_arguments_give_one_digest() -> None:
    assert act("search", '{"q": "refund", "page": 2}') == act("search", {"page": 2, "q": "refund"})


PLAIN = Fingerprinter(KEY, Policy())  # no rules at all: the digest of the arguments as given


def plain(tool: str, args: Any) -> str:
    return PLAIN.action(tool, args).digest


def test_without_a_rule_nothing_is_normalised() -> None:
    for args in ({"q": "x", "debug": True}, {"q": "x", "limit": 10}, {"Q": "x"}):
        assert act("other", args) == plain("other", args)  # exactly the rule-free digest...
        assert act("other", args) != act("other", {"q": "x"})  # ... so each field counts


# --- ignore_fields ------------------------------------------------------------------------


def test_ignore_fields_remove_the_declared_field() -> None:
    assert act("search", {"q": "x", "debug": True}) == act("search", {"q": "x"})
    assert act("search", {"q": "x", "debug": 1}) == act("search", {"q": "x", "debug": "verbose"})
    assert act("search", '{"q": "x", "debug": true}') == act("search", {"q": "x"})


def test_ignore_fields_follow_dotted_paths() -> None:
    assert act("search", {"q": "x", "meta": {"trace": "t1", "lang": "en"}}) == act(
        "search", {"q": "x", "meta": {"trace": "t2", "lang": "en"}}
    )
    assert act("search", {"q": "x", "meta": {"trace": "t1", "lang": "en"}}) == act(
        "search", {"q": "x", "meta": {"lang": "en"}}
    )


def test_ignore_fields_remove_only_what_is_declared() -> None:
    base = {"q": "x", "meta": {"lang": "en"}}
    # a sibling under the same parent still counts
    assert act("search", {**base, "meta": {"lang": "de"}}) != act("search", base)
    # a same-named key elsewhere still counts ("debug" is declared at the top only)
    assert act("search", {**base, "opts": {"debug": 1}}) != act("search", {**base, "opts": {"debug": 2}})
    # "meta.trace" does not remove a top-level "trace"
    assert act("search", {**base, "trace": 1}) != act("search", base)
    # a prefix of a declared name is not the name
    assert act("search", {**base, "debu": 1}) != act("search", base)
    # the parent of a declared path is kept
    assert act("search", {"q": "x", "meta": {}}) != act("search", {"q": "x"})
    # and the rule belongs to its tool only
    assert act("other", {**base, "debug": True}) != act("other", base)


def test_ignore_fields_do_not_touch_the_callers_value() -> None:
    args = {"q": "x", "debug": True, "meta": {"trace": 1}}
    snapshot = json.dumps(args, sort_keys=True)
    FP.action("search", args)
    assert json.dumps(args, sort_keys=True) == snapshot


# --- defaults -------------------------------------------------------------------------------


def test_an_omitted_optional_field_equals_its_documented_default() -> None:
    assert act("search", {"q": "x", "limit": 10}) == act("search", {"q": "x"})
    assert act("search", {"q": "x", "exact": False, "mode": "fast"}) == act("search", {"q": "x"})
    assert act("search", {"q": "x", "options": {"page_size": 20, "lang": "en"}}) == act(
        "search", {"q": "x", "options": {"lang": "en"}}
    )


def test_a_value_other_than_the_default_counts() -> None:
    assert act("search", {"q": "x", "limit": 11}) != act("search", {"q": "x"})
    assert act("search", {"q": "x", "mode": "Fast"}) != act("search", {"q": "x"})
    assert act("search", {"q": "x", "options": {"page_size": 50}}) != act("search", {"q": "x", "options": {}})


@pytest.mark.parametrize(
    "field, value",
    [("score", True), ("score", 1.0), ("limit", 10.0), ("exact", 0), ("limit", "10"), ("exact", None)],
)
def test_a_default_is_matched_by_type_too(field: str, value: Any) -> None:
    """`true` does not equal a default of 1; 1.0 does not equal 1 (no rounding)."""
    args = {"q": "x", field: value}
    assert act("search", args) == plain("search", args)  # the field is kept as it came
    assert act("search", args) != act("search", {"q": "x"})


def test_defaults_apply_only_to_their_tool() -> None:
    assert act("other", {"q": "x", "limit": 10}) == plain("other", {"q": "x", "limit": 10})
    # Positive control: the tool that declares the default drops it.
    assert act("search", {"q": "x", "limit": 10}) == plain("search", {"q": "x"})


def test_container_defaults_are_matched_by_type_all_the_way_down() -> None:
    fp = Fingerprinter(KEY, policy_from_mapping({"tools": {"t": {"defaults": {"flags": [1], "opts": {"a": 1}}}}}))
    for args in ({"flags": [True]}, {"flags": [1.0]}, {"opts": {"a": True}}):
        assert fp.action("t", args).digest == plain("t", args)
    # Positive control: the same containers with the default's own types are dropped.
    assert fp.action("t", {"flags": [1], "opts": {"a": 1}}).digest == plain("t", {})


# --- identity fields ----------------------------------------------------------------------------


def test_identity_fields_keep_two_tenants_apart() -> None:
    args = {"order_id": "A12"}
    a = act("lookup_order", args, {"tenant": "acme"})
    b = act("lookup_order", args, {"tenant": "globex"})
    assert a != b
    assert a == act("lookup_order", args, {"tenant": "acme"})
    assert a != act("lookup_order", args)


def test_every_declared_identity_field_counts_and_undeclared_ones_do_not() -> None:
    args = {"order_id": "A12"}
    assert act("lookup_order", args, {"tenant": "acme", "user": "u1"}) != act(
        "lookup_order", args, {"tenant": "acme", "user": "u2"}
    )
    assert act("lookup_order", args, {"tenant": "acme", "session": "s1"}) == act(
        "lookup_order", args, {"tenant": "acme", "session": "s2"}
    )
    # a tool without identity fields ignores the mapping altogether
    assert act("search", {"q": "x"}, {"tenant": "acme"}) == act("search", {"q": "x"}, {"tenant": "globex"})


def test_identity_values_keep_their_type_and_order_does_not_matter() -> None:
    args = {"order_id": "A12"}
    assert act("lookup_order", args, {"tenant": 1}) != act("lookup_order", args, {"tenant": "1"})
    assert act("lookup_order", args, {"tenant": "a", "user": "b"}) == act(
        "lookup_order", args, {"user": "b", "tenant": "a"}
    )
    # identity cannot be smuggled in through the arguments, nor the other way round
    assert act("lookup_order", {"order_id": "A12", "tenant": "acme"}) != act(
        "lookup_order", args, {"tenant": "acme"}
    )


def test_identity_reaches_the_action_through_fingerprint_call() -> None:
    def call(tenant: str) -> Any:
        return fingerprint_call(
            RawCall(seq=1, tool="lookup_order", arguments={"order_id": "A12"}, identity={"tenant": tenant}), FP
        )

    assert call("acme").action != call("globex").action
    assert call("acme").action == call("acme").action


# --- result volatile fields ---------------------------------------------------------------------


def test_default_volatile_fields_are_the_documented_set() -> None:
    assert DEFAULT_RESULT_VOLATILE == {"timestamp", "request_id", "trace_id", "span_id", "nonce", "created_at", "loop_guard_notice"}
    assert Policy().volatile_for("anything") == DEFAULT_RESULT_VOLATILE


@pytest.mark.parametrize("field", sorted(DEFAULT_RESULT_VOLATILE))
def test_each_default_volatile_field_is_removed_at_every_depth(field: str) -> None:
    a = {"status": "delivered", field: "v1", "order": {field: "v1", "items": [{"id": 1, field: "v1"}]}}
    b = {"status": "delivered", field: "v2", "order": {field: "v2", "items": [{"id": 1, field: "v2"}]}}
    bare = {"status": "delivered", "order": {"items": [{"id": 1}]}}
    assert res("lookup_order", a) == res("lookup_order", b) == res("lookup_order", bare)
    assert res("lookup_order", json.dumps(a)) == res("lookup_order", bare)


def test_other_result_fields_still_count() -> None:
    assert res("lookup_order", {"status": "pending", "timestamp": 1}) != res(
        "lookup_order", {"status": "delivered", "timestamp": 1}
    )
    assert res("lookup_order", {"version": 7}) != res("lookup_order", {"version": 8})
    assert res("lookup_order", {"timestamps": 1}) != res("lookup_order", {"timestamps": 2})
    assert res("lookup_order", {"Timestamp": 1}) != res("lookup_order", {"Timestamp": 2})


def test_volatile_fields_are_removed_in_too_deep_results_as_well() -> None:
    def deep(ts: int) -> Any:
        value: Any = {"state": "done", "timestamp": ts}
        for _ in range(100):
            value = {"child": value, "request_id": ts}
        return value

    assert res("lookup_order", deep(1)) == res("lookup_order", deep(2))
    assert "too_deep" in FP.result("lookup_order", deep(1)).flags


def test_volatile_fields_do_not_touch_arguments() -> None:
    assert act("lookup_order", {"order_id": "A", "timestamp": 1}) != act("lookup_order", {"order_id": "A", "timestamp": 2})


def test_per_tool_volatile_fields_replace_the_default_set() -> None:
    assert res("get_status", {"state": "ok", "etag": "a", "served_by": "n1"}) == res("get_status", {"state": "ok"})
    # the default set no longer applies to this tool
    assert res("get_status", {"state": "ok", "timestamp": 1}) != res("get_status", {"state": "ok", "timestamp": 2})
    # and the override is per tool
    assert res("lookup_order", {"state": "ok", "etag": "a"}) != res("lookup_order", {"state": "ok", "etag": "b"})


def test_an_empty_per_tool_set_drops_nothing() -> None:
    assert res("raw_status", {"state": "ok", "timestamp": 1}) != res("raw_status", {"state": "ok", "timestamp": 2})


def test_policy_wide_volatile_fields_replace_the_default_set() -> None:
    fp = Fingerprinter(KEY, policy_from_mapping({"result_volatile_fields": ["generated_at"]}))
    assert fp.result("t", {"a": 1, "generated_at": 1}).digest == fp.result("t", {"a": 1}).digest
    assert fp.result("t", {"a": 1, "timestamp": 1}).digest != fp.result("t", {"a": 1}).digest


def test_equal_results_from_different_tools_share_a_digest() -> None:
    assert res("lookup_order", {"status": "ok"}) == res("search", {"status": "ok"})


# --- writes -------------------------------------------------------------------------------------


def test_idempotency_key_declares_a_side_effect() -> None:
    assert POLICY.rule("issue_refund").side_effect is True
    assert POLICY.rule("issue_refund").idempotency_key == "idempotency_key"


def test_same_write_with_a_different_idempotency_key() -> None:
    w1, k1 = FP.write("issue_refund", {"order_id": "A12", "amount": 10, "idempotency_key": "key-1"})
    w2, k2 = FP.write("issue_refund", {"amount": 10, "order_id": "A12", "idempotency_key": "key-2"})
    w3, k3 = FP.write("issue_refund", {"order_id": "A12", "amount": 10, "idempotency_key": "key-1"})
    assert w1 == w2 == w3
    assert k1 is not None and k2 is not None
    assert k1 != k2
    assert k1 == k3
    for digest in (w1, k1, k2):
        assert re.fullmatch(r"[0-9a-f]{32}", digest)


def test_different_writes_differ_whatever_the_key() -> None:
    w1, _ = FP.write("issue_refund", {"order_id": "A12", "amount": 10, "idempotency_key": "k"})
    w2, _ = FP.write("issue_refund", {"order_id": "A12", "amount": 11, "idempotency_key": "k"})
    w3, _ = FP.write("issue_refund", {"order_id": "A12", "amount": 10.0, "idempotency_key": "k"})
    assert len({w1, w2, w3}) == 3


def test_write_without_its_idempotency_key() -> None:
    with_key = FP.write("issue_refund", {"order_id": "A12", "idempotency_key": "k"})
    without = FP.write("issue_refund", {"order_id": "A12"})
    assert without[1] is None
    assert without[0] == with_key[0]


def test_nested_idempotency_key_path() -> None:
    w1, k1 = FP.write("send_email", {"to": "a@example.com", "meta": {"dedupe_id": "d1", "x": 1}})
    w2, k2 = FP.write("send_email", {"to": "a@example.com", "meta": {"dedupe_id": "d2", "x": 1}})
    assert w1 == w2
    assert k1 != k2 and None not in (k1, k2)
    assert FP.write("send_email", {"to": "b@example.com", "meta": {"dedupe_id": "d1", "x": 1}})[0] != w1


def test_write_without_declared_key() -> None:
    w1, k1 = FP.write("delete_file", {"path": "/a", "idempotency_key": "x"})
    w2, k2 = FP.write("delete_file", {"path": "/a", "idempotency_key": "y"})
    assert k1 is None and k2 is None
    assert w1 != w2  # nothing declared: the field is ordinary data


def test_write_idempotency_key_value_keeps_its_type() -> None:
    _, k1 = FP.write("issue_refund", {"order_id": "A", "idempotency_key": 1})
    _, k2 = FP.write("issue_refund", {"order_id": "A", "idempotency_key": "1"})
    assert k1 != k2


def test_fingerprint_call_fills_write_digests_for_side_effect_tools() -> None:
    def call(seq: int, key: str) -> Any:
        return fingerprint_call(
            RawCall(
                seq=seq,
                tool="issue_refund",
                arguments=json.dumps({"order_id": "A12", "amount": 10, "idempotency_key": key}),
                result={"status": "ok", "request_id": f"r{seq}"},
            ),
            FP,
        )

    a, b, c = call(1, "k1"), call(2, "k2"), call(3, "k1")
    assert a.write == b.write == c.write
    assert a.write_key != b.write_key
    assert a.write_key == c.write_key
    assert a.result == b.result  # request_id is volatile
    read = fingerprint_call(RawCall(seq=4, tool="lookup_order", arguments={"order_id": "A12"}), FP)
    assert read.write is None and read.write_key is None


def test_identity_fields_keep_two_tenants_writes_apart() -> None:
    def call(tenant: str) -> Any:
        return fingerprint_call(
            RawCall(
                seq=1,
                tool="issue_refund",
                arguments={"order_id": "A12", "amount": 10, "idempotency_key": "k"},
                identity={"tenant": tenant},
            ),
            FP,
        )

    a, b = call("acme"), call("globex")
    assert a.action != b.action
    assert a.write != b.write


def test_ignore_fields_alone_and_defaults_alone_each_normalise() -> None:
    """A tool that declares only one of the two rules still gets it, and the digest is
    exactly the rule-free digest of what is left."""
    fp = Fingerprinter(KEY, policy_from_mapping({"tools": {
        "only_ignore": {"ignore_fields": ["debug"]},
        "only_defaults": {"defaults": {"limit": 10}},
    }}))
    assert fp.action("only_ignore", {"q": "x", "debug": True}).digest == plain("only_ignore", {"q": "x"})
    assert fp.action("only_defaults", {"q": "x", "limit": 10}).digest == plain("only_defaults", {"q": "x"})
    # Negative controls: each rule is its tool's own.
    assert fp.action("only_ignore", {"q": "x", "limit": 10}).digest == plain("only_ignore", {"q": "x", "limit": 10})
    assert fp.action("only_defaults", {"q": "x", "debug": True}).digest == plain("only_defaults", {"q": "x", "debug": True})


def test_arguments_that_are_not_an_object_are_digested_as_they_are() -> None:
    for args in ([{"debug": True}], '"debug"', "not json at all"):
        assert act("search", args) == plain("search", args)


def test_an_unfinished_call_has_no_result_and_a_finished_one_keeps_its_result_flags() -> None:
    double = json.dumps(json.dumps({"a": 1}))  # a result encoded twice
    done = fingerprint_call(RawCall(seq=1, tool="t", arguments={}, result=double), FP)
    assert done.result is not None and "result:" + DOUBLE_ENCODED in done.flags
    open_call = fingerprint_call(RawCall(seq=1, tool="t", arguments={}, result=double, finished=False), FP)
    assert open_call.result is None
    assert not [f for f in open_call.flags if f.startswith("result:")]  # a result it never returned


def test_long_tool_names_are_told_apart() -> None:
    """Past the quoted-name cache's length limit, names are still part of the digest."""
    a, b = "t" * 300 + "a", "t" * 300 + "b"
    assert act(a, {"q": 1}) != act(b, {"q": 1})
    assert act(a, {"q": 1}) == act(a, {"q": 1})


def test_a_tool_with_meaningful_fields_still_masks_the_others() -> None:
    fp = Fingerprinter(KEY, policy_from_mapping({"tools": {"t": {"meaningful_fields": ["ref"]}}}))
    one, two = "3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b", "7d9e1f3a-5b6c-4d8e-9f0a-2b4c6d8e0f1a"
    assert fp.result("t", {"ok": 1, "messageId": one}).digest == fp.result("t", {"ok": 1, "messageId": two}).digest
    assert fp.result("t", {"ok": 1, "ref": one}).digest != fp.result("t", {"ok": 1, "ref": two}).digest
