"""The digest-only paths (`action_digest`, `result_digest`: memo, native bytes) apply a
tool's rules exactly as the full paths do, for JSON text and parsed values alike, and the
memo keeps what its bounds say. Each rule is checked against the digest of the payload
the rule makes (a field ignored: the payload without it), with a negative control."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_loopguard.canon import DigestKey
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.fingerprint import fingerprinter as fpmod
from otel_loopguard.policy import policy_from_mapping

KEY = DigestKey(b"digest-rules-test-key-0123", "test")
POLICY = policy_from_mapping({"tools": {
    "search": {"ignore_fields": ["debug"]},
    "paged": {"defaults": {"limit": 10}},
    "lookup": {"identity_fields": ["tenant"]},
}})


def _digest(tool: str, args: Any, identity: Any = None) -> tuple[str, frozenset[str]]:
    fp = Fingerprinter(KEY, POLICY)
    return fp.action_digest(tool, POLICY.rule(tool), args, identity)


@pytest.mark.parametrize("as_text", [True, False])
def test_ignored_fields_and_defaults_apply_on_the_digest_path(as_text: bool) -> None:
    def d(tool: str, args: dict[str, Any]) -> tuple[str, frozenset[str]]:
        return _digest(tool, json.dumps(args) if as_text else args)

    assert d("search", {"q": 1, "debug": True}) == d("search", {"q": 1})
    assert d("search", {"q": 1, "debug": True}) != d("search", {"q": 2})  # negative control
    assert d("paged", {"q": 1, "limit": 10}) == d("paged", {"q": 1})
    assert d("paged", {"q": 1, "limit": 20}) != d("paged", {"q": 1})
    # the same payloads under a tool without the rule keep the field
    assert d("other", {"q": 1, "debug": True}) != d("other", {"q": 1})


@pytest.mark.parametrize("as_text", [True, False])
def test_identity_values_count_on_the_digest_path(as_text: bool) -> None:
    args: Any = '{"order": "A7"}' if as_text else {"order": "A7"}
    a, b = _digest("lookup", args, {"tenant": "a"}), _digest("lookup", args, {"tenant": "b"})
    assert a != b and a == _digest("lookup", args, {"tenant": "a", "unrelated": 1})
    fp = Fingerprinter(KEY, POLICY)
    assert a[0] == fp.action("lookup", args, {"tenant": "a"}).digest


def test_the_memo_holds_payloads_up_to_its_size_and_tools_up_to_theirs() -> None:
    fp = Fingerprinter(KEY, POLICY)
    rule = POLICY.rule("t")
    at_limit = '"' + "x" * (fpmod.MEMO_MAX_CHARS - 2) + '"'
    over = '"' + "x" * (fpmod.MEMO_MAX_CHARS - 1) + '"'
    fp.action_digest("t", rule, at_limit)
    fp.action_digest("t", rule, over)
    fp.result_digest("t", rule, at_limit)
    fp.result_digest("t", rule, over)
    assert set(fp._actions) == {("t", at_limit)} and set(fp._results) == {("t", at_limit)}  # noqa: SLF001
    tool = "x" * fpmod.MAX_CACHED_TOOL_CHARS
    fp.action_digest(tool, POLICY.rule(tool), "[1]")
    fp.action_digest(tool + "y", POLICY.rule(tool + "y"), "[1]")
    assert (tool, "[1]") in fp._actions and (tool + "y", "[1]") not in fp._actions  # noqa: SLF001
    # the prepared HMAC prefixes keep the same bound on names, on the Python path and the native one
    prefixes = {**fp._prefixes, **fp._native_prefixes}  # noqa: SLF001
    assert ("action", tool) in prefixes and ("action", tool + "y") not in prefixes


def test_only_json_results_are_masked_never_opaque_text() -> None:
    fp = Fingerprinter(KEY, POLICY)
    rule = POLICY.rule("t")
    uuid_value = "0b7f1c2e-6a4d-4f3b-9c1e-2d5a8b7c6f10"
    broken = '{"id":"%s","x":1' % uuid_value  # not JSON: hashed as the exact text
    digest, flags, exact = fp.result_digests("t", rule, broken)
    assert exact is None and "opaque_text" in flags
    assert digest != fp.result_digests("t", rule, broken.replace("0b7f", "1c8a"))[0]
    masked = fp.result_digests("t", rule, broken + "}")  # the JSON twin: its id is masked
    assert masked[2] is not None and masked[0] == fp.result_digests("t", rule, broken.replace("0b7f", "1c8a") + "}")[0]


def test_text_with_lone_surrogates_is_digested_and_kept_apart() -> None:
    fp = Fingerprinter(KEY, POLICY)
    a = fp.action("t", '{"a": "\\ud800"}').digest
    assert a != fp.action("t", '{"a": "\\ud801"}').digest
    assert fp.result("t", '["\\udfff"]').digest != fp.result("t", '["\\udffe"]').digest


def test_results_of_tools_up_to_the_cached_name_length_are_memoised() -> None:
    fp = Fingerprinter(KEY, POLICY)
    tool = "x" * fpmod.MAX_CACHED_TOOL_CHARS
    fp.result_digest(tool, POLICY.rule(tool), "[1]")
    fp.result_digest(tool + "y", POLICY.rule(tool + "y"), "[1]")
    assert (tool, "[1]") in fp._results and (tool + "y", "[1]") not in fp._results  # noqa: SLF001


def test_a_full_memo_starts_over_instead_of_growing() -> None:
    fp = Fingerprinter(KEY, POLICY)
    rule = POLICY.rule("t")
    for i in range(fpmod.MEMO_ENTRIES + 1):
        fp.action_digest("t", rule, f"[{i}]")
    assert len(fp._actions) == 1  # noqa: SLF001  # the entry that found it full
