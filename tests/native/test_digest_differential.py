"""The Fingerprinter's digests through the Rust module equal the Python reference's
(action_parts / result_full, which never take it) on the captures and generated payloads,
for every kind of tool rule; and the module is really the one answering."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard.canon import DigestKey
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.canon import canonical as canon
from otel_loopguard import native as chooser
from otel_loopguard.canon import rust as native
from otel_loopguard.policy import Policy
from otel_loopguard.policy.model import ToolRule

from .test_canonical_differential import CORPUS, EDGES, json_texts

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SECRET = b"differential-key-0123456789"
TOOLS = {
    "ident": ToolRule(identity_fields=("tenant",)),
    "keep": ToolRule(meaningful_fields=("id",)),
    "novol": ToolRule(volatile_values=False),
    "ownvol": ToolRule(result_volatile_fields=frozenset({"a", "b/c"})),
    "ign": ToolRule(ignore_fields=("page",)),  # the Python path: the rule normalises values
}
NAMES = ["plain", "naïve \"tool\"", *TOOLS]


def fingerprinter() -> Fingerprinter:
    return Fingerprinter(DigestKey(SECRET), Policy(tools=TOOLS))


def assert_same_digests(fp: Fingerprinter, text: Any, tool: str) -> None:
    rule = fp.policy.rule(tool)
    identity = {"tenant": "acme", "other": 1} if tool == "ident" else None
    got = fp.action_digest(tool, rule, text, identity)
    want = fp.action_parts(tool, rule, text, identity)[:2]
    assert got == want, (tool, repr(text)[:200])
    assert (got[1] is canon.PROSE) == (want[1] is canon.PROSE)
    got_r = fp.result_digests(tool, rule, text)
    digest, flags, _, exact = fp.result_full(tool, rule, text)
    assert got_r == (digest, flags, exact), (tool, repr(text)[:200])


@pytest.mark.parametrize("tool", NAMES)
def test_digests_on_the_corpus(tool: str) -> None:
    fp = fingerprinter()
    for text in CORPUS[::3] + EDGES:
        assert_same_digests(fp, text, tool)


@PROPS
@given(json_texts(), st.sampled_from(NAMES))
def test_digests_on_generated_json(text: str, tool: str) -> None:
    fp = fingerprinter()
    assert_same_digests(fp, text, tool)
    assert_same_digests(fp, text, tool)  # the second time from the memo
    assert_same_digests(fp, " " * 600 + text, tool)  # past the memo's size: computed every time


def test_masked_results_keep_both_digests() -> None:
    fp = fingerprinter()
    text = '{"id":"0b5f8e0e-7a3c-4d33-9a5e-6e5f1c2d3b4a","ok":true}'
    digest, flags, exact = fp.result_digests("plain", fp.policy.rule("plain"), text)
    assert exact is not None and exact != digest  # a mask applied: the negative control below
    assert fp.result_digests("keep", fp.policy.rule("keep"), text)[2] is None
    assert_same_digests(fp, text, "plain")
    assert_same_digests(fp, text, "keep")


def test_the_fingerprinter_takes_the_native_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation-style: break the native digest and the Fingerprinter's answer must change."""
    fp = fingerprinter()
    rule = fp.policy.rule("plain")
    right = fp.action_digest("plain", rule, '{"q": 1}')
    monkeypatch.setattr(native, "digest_text", lambda *a, **k: ("0" * 32, canon.NO_FLAGS))
    assert fingerprinter().action_digest("plain", rule, '{"q": 1}') == ("0" * 32, canon.NO_FLAGS)
    monkeypatch.setattr(native, "AVAILABLE", False)  # the Python path answers alike
    assert fingerprinter().action_digest("plain", rule, '{"q": 1}') == right


def test_native_prefix_digests_equal_the_python_key() -> None:
    key = DigestKey(SECRET)
    for head in (b"", b"loopguard.v1\x00action\x00\"t\"\x00", bytes(range(256))):
        for rest in (b"", b"x", bytes(range(256)) * 3):
            assert key.native_prefixed(head).digest(rest) == key.digest_after(key.prefixed(head), rest)
    long_secret = DigestKey(b"k" * 200)  # longer than a SHA-256 block: hashed first
    assert long_secret.native_prefixed(b"a").digest(b"b") == long_secret.digest(b"ab")


def test_the_native_key_shows_and_keeps_no_secret() -> None:
    handle = native.key(SECRET)
    shown = repr(handle) + repr(handle.prefixed(b"x"))
    assert SECRET.decode() not in shown and SECRET.hex() not in shown
    with pytest.raises(TypeError):
        pickle.dumps(handle)
    with pytest.raises(TypeError):
        pickle.dumps(handle.prefixed(b"x"))


@pytest.mark.real  # starts a process
def test_the_environment_variable_forces_the_python_path() -> None:
    code = "from otel_loopguard import native; print(native.PATH)"
    env = {**os.environ, chooser.PURE_ENV: "1"}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip() == "python"
    env[chooser.PURE_ENV] = "0"
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip() == "native"
