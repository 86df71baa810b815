"""`Fingerprinter.parse`: the canonical parser under the policy's own size limit."""

from __future__ import annotations

from otel_loopguard.canon import DigestKey
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.canon.canonical import OPAQUE_TEXT, TOO_LARGE
from otel_loopguard.policy import policy_from_mapping

KEY = DigestKey(b"fingerprinter-test-key-0123456789", "test")


def test_parse_honours_the_policys_size_limit() -> None:
    fp = Fingerprinter(KEY, policy_from_mapping({"max_bytes": 64}))
    text = '{"blob": "' + "x" * 60 + '"}'
    big = fp.parse(text)
    assert (big.value, big.form, big.flags) == (text, "text", frozenset({OPAQUE_TEXT, TOO_LARGE}))
    small = fp.parse('{"b": 1, "a": [2]}')
    assert (small.value, small.form, small.flags) == ({"b": 1, "a": [2]}, "json", frozenset())
    # the default limit is far larger: the same text is JSON there
    assert Fingerprinter(KEY, policy_from_mapping({})).parse(text).form == "json"
