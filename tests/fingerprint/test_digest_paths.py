"""The digest-only paths (memo, native bytes) keep every rule the general path keeps:
size and depth limits, and volatile fields dropped at any depth. Each case is checked
against a fixed answer, not only against the general path (which shares helpers)."""

from __future__ import annotations

from otel_loopguard.canon import DigestKey, canonicalize
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.canon.canonical import OPAQUE_TEXT, TOO_DEEP, TOO_LARGE
from otel_loopguard.policy import Policy, policy_from_mapping

KEY = DigestKey(b"digest-paths-test-key-0123")
MIXED_DEEP = '[{"a":' * 35 + "1" + "}]" * 35  # 70 levels, half objects, half arrays


def test_mixed_nesting_past_the_depth_limit_is_flagged_on_every_path() -> None:
    c = canonicalize(MIXED_DEEP)
    assert (c.text, c.flags) == (MIXED_DEEP, {TOO_DEEP})
    fp = Fingerprinter(KEY, Policy())
    rule = fp.policy.rule("t")
    assert fp.action_digest("t", rule, MIXED_DEEP)[1] == {TOO_DEEP}
    assert fp.result_digest("t", rule, MIXED_DEEP)[1] == {TOO_DEEP}
    within = '[{"a":' * 32 + "1" + "}]" * 32  # 64 levels: the limit itself
    assert canonicalize(within).flags == frozenset()
    assert fp.action_digest("t", rule, within)[1] == frozenset()


def test_small_text_over_the_policys_size_limit_is_opaque_on_the_digest_path() -> None:
    fp = Fingerprinter(KEY, policy_from_mapping({"max_bytes": 64}))
    rule = fp.policy.rule("t")
    text = '{"blob": "' + "x" * 60 + '"}'  # 72 characters: small enough for the memo
    assert fp.action_digest("t", rule, text)[1] == {OPAQUE_TEXT, TOO_LARGE}
    assert fp.result_digest("t", rule, text)[1] == {OPAQUE_TEXT, TOO_LARGE}
    assert fp.action_digest("t", rule, text)[0] == fp.action("t", text).digest


def test_a_volatile_field_nested_below_the_top_is_dropped_on_the_digest_path() -> None:
    fp = Fingerprinter(KEY, Policy())
    rule = fp.policy.rule("t")
    nested = fp.result_digest("t", rule, '{"x":{"timestamp":2,"v":1}}')
    assert nested == fp.result_digest("t", rule, '{"x":{"v":1}}')
    assert nested == fp.result_digest("t", rule, {"x": {"timestamp": 3, "v": 1}})  # parsed: the flat path declines
    assert nested != fp.result_digest("t", rule, '{"x":{"v":2}}')  # negative control
    top = fp.result_digest("t", rule, '{"timestamp":2}')
    assert top == fp.result_digest("t", rule, "{}") == fp.result_digest("t", rule, {"timestamp": 5})
    assert fp.result_digest("t", rule, "[1,2]") != fp.result_digest("t", rule, "[1,3]")
