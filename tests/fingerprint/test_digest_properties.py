"""Property-based checks of canonical form and keyed digests (hypothesis)."""

from __future__ import annotations

import enum
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from otel_loopguard.canon import Canonical, DigestKey, canonicalize
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.canon.canonical import (
    DOUBLE_ENCODED,
    DUPLICATE_KEYS,
    NON_FINITE,
    NON_JSON_VALUE,
    NON_STRING_KEYS,
    OPAQUE_TEXT,
    TOO_DEEP,
    TOO_LARGE,
)
from otel_loopguard.policy import Policy

ALL_FLAGS = {
    OPAQUE_TEXT,
    DOUBLE_ENCODED,
    DUPLICATE_KEYS,
    NON_FINITE,
    NON_STRING_KEYS,
    NON_JSON_VALUE,
    TOO_DEEP,
    TOO_LARGE,
}
HEX32 = re.compile(r"[0-9a-f]{32}")
REPO = Path(__file__).resolve().parents[2]

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEY = DigestKey(b"property-test-key-0123456789abcdef", "test-key")
FP = Fingerprinter(KEY, Policy())

# --- strategies ---------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=6)


def shuffled(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every object's keys in another insertion order."""
    if isinstance(value, dict):
        items = [(k, shuffled(v, rnd)) for k, v in value.items()]
        rnd.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [shuffled(v, rnd) for v in value]
    return value


class Color(enum.IntEnum):
    RED = 1


class Thing:
    """An arbitrary object with a stable text form."""

    def __str__(self) -> str:
        return "a thing"

    __repr__ = __str__


hashables = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats()
    | st.text(max_size=5)
    | st.tuples(st.integers(-5, 5), st.text(max_size=3))
    | st.frozensets(st.integers(-5, 5), max_size=3)
)
odd_text = st.sampled_from(
    [
        "{'a': 1}",
        "NaN",
        "-Infinity",
        "[",
        '{"a":1,"a":2}',
        json.dumps(json.dumps({"x": [1, 2]})),
        json.dumps("{not json"),
        json.dumps('{"a":1,"a":2} x'),
        "\ud800",
        "\x00",
        "1" * 5000,
        "[" * 3000 + "]" * 3000,
        "  ",
        "",
    ]
)
odd_leaves = (
    json_scalars
    | st.floats()  # NaN and infinities
    | st.builds(pow, st.just(10), st.sampled_from([5000, 5001]))  # beyond the int->str limit
    | st.binary(max_size=8)
    | st.builds(bytearray, st.binary(max_size=4))
    | st.builds(Thing)
    | st.just(Color.RED)
    | st.decimals(allow_nan=True)
    | st.complex_numbers(allow_nan=True)
    | st.datetimes()
    | odd_text
    | st.builds(json.dumps, json_values)
)
odd_values = st.recursive(
    odd_leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=4) | hashables, children, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=3)
    ),
    max_leaves=25,
)


# --- canonical form never raises ----------------------------------------------


@FUZZ
@given(odd_values)
def test_canonicalize_never_raises_and_is_deterministic(value: Any) -> None:
    c = canonicalize(value)
    assert isinstance(c, Canonical)
    assert c.form in ("json", "text")
    assert isinstance(c.text, str)
    assert c.flags <= ALL_FLAGS
    assert canonicalize(value) == c


@FUZZ
@given(odd_values, st.integers(1, 5))
def test_canonicalize_never_raises_with_a_small_depth_limit(value: Any, depth: int) -> None:
    c = canonicalize(value, max_depth=depth, max_bytes=64)
    assert c.flags <= ALL_FLAGS


@FAST
@given(odd_values)
def test_fingerprinter_never_raises(value: Any) -> None:
    assert HEX32.fullmatch(FP.action("tool", value).digest)
    assert HEX32.fullmatch(FP.result("tool", value).digest)


@FUZZ
@given(json_values)
def test_plain_json_values_carry_no_flags(value: Any) -> None:
    if isinstance(value, str):
        value = json.dumps(value)  # a bare Python str would be read as JSON text
    assert canonicalize(value).flags == frozenset()


@FUZZ
@given(json_values)
def test_canonical_text_is_valid_json_that_reads_back_to_the_value(value: Any) -> None:
    c = canonicalize({"v": value})
    assert c.flags == frozenset()
    assert json.loads(c.text) == {"v": value}
    assert canonicalize(c.text).text == c.text  # idempotent


@FUZZ
@given(json_values)
def test_slow_path_writes_the_same_text_as_the_fast_path(value: Any) -> None:
    wrapped = {"v": value}
    fast = canonicalize(wrapped)
    slow = canonicalize(wrapped, max_depth=1)
    assert slow.text == fast.text


# --- key order never matters; array order does --------------------------------


@FAST
@given(json_objects, st.randoms(use_true_random=False))
def test_shuffling_keys_gives_the_same_digest(value: dict[str, Any], rnd: random.Random) -> None:
    other = shuffled(value, rnd)
    assert canonicalize(other).text == canonicalize(value).text
    assert FP.action("t", other).digest == FP.action("t", value).digest
    assert FP.result("t", other).digest == FP.result("t", value).digest
    # and the same holds when both arrive as JSON text, whatever the spacing
    assert FP.action("t", json.dumps(other, indent=2)).digest == FP.action("t", json.dumps(value)).digest


@FAST
@given(
    st.lists(json_values, min_size=2, max_size=6, unique_by=lambda v: json.dumps(v, sort_keys=True)).flatmap(
        lambda items: st.tuples(st.just(items), st.permutations(range(len(items))))
    )
)
def test_permuting_a_list_of_distinct_elements_changes_the_digest(case: tuple[list[Any], list[int]]) -> None:
    items, order = case
    assume(list(order) != list(range(len(items))))
    permuted = [items[i] for i in order]
    assert FP.action("t", {"items": permuted}).digest != FP.action("t", {"items": items}).digest
    assert FP.action("t", permuted).digest != FP.action("t", items).digest


@FAST
@given(json_objects, json_objects)
def test_different_canonical_forms_give_different_digests(a: dict[str, Any], b: dict[str, Any]) -> None:
    assume(canonicalize(a).text != canonicalize(b).text)
    assert FP.action("t", a).digest != FP.action("t", b).digest


# --- digests: format and keys ---------------------------------------------------


@FAST
@given(json_values, st.text(min_size=1, max_size=10))
def test_digests_are_32_lowercase_hex(value: Any, tool: str) -> None:
    for digest in (FP.action(tool, value).digest, FP.result(tool, value).digest, FP.write(tool, value)[0]):
        assert HEX32.fullmatch(digest), digest


@FAST
@given(json_objects, st.binary(min_size=16, max_size=48), st.binary(min_size=16, max_size=48))
def test_another_key_gives_another_digest(value: dict[str, Any], k1: bytes, k2: bytes) -> None:
    assume(k1 != k2)
    a = Fingerprinter(DigestKey(k1), Policy())
    b = Fingerprinter(DigestKey(k2), Policy())
    assert a.action("t", value).digest != b.action("t", value).digest
    assert a.result("t", value).digest != b.result("t", value).digest
    assert a.key_id != b.key_id


@FAST
@given(json_objects, st.binary(min_size=16, max_size=48))
def test_same_key_gives_same_digest_in_one_process(value: dict[str, Any], k: bytes) -> None:
    assert Fingerprinter(DigestKey(k), Policy()).action("t", value).digest == (
        Fingerprinter(DigestKey(bytes(k)), Policy()).action("t", value).digest
    )


def test_tool_name_domain_and_form_separate_digests() -> None:
    args = {"order_id": "A12"}
    assert FP.action("lookup_order", args).digest != FP.action("lookup_orders", args).digest
    # action, result and write digests of one value live in different domains
    assert len({FP.action("t", args).digest, FP.result("t", args).digest, FP.write("t", args)[0]}) == 3
    # opaque text "hello" is not the JSON string "hello"
    assert FP.action("t", "hello").digest != FP.action("t", '"hello"').digest
    # a tool name cannot leak into the arguments through the framing
    assert FP.action("a", ["b"]).digest != FP.action('a"', ["b"]).digest


# --- across processes ---------------------------------------------------------------

_CHILD = r"""
import json, sys
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import Policy
payloads = json.loads(sys.stdin.read())
payloads.append({"tags": {"alpha", "beta", "gamma", "delta", "epsilon"}})
key = load_key()
fp = Fingerprinter(key, Policy())
print(json.dumps({
    "key_id": key.key_id,
    "actions": [fp.action("lookup_order", p).digest for p in payloads],
    "results": [fp.result("lookup_order", p).digest for p in payloads],
}))
"""


def _payloads() -> list[Any]:
    rnd = random.Random(20240601)
    out: list[Any] = [
        {"order_id": "A12", "include_items": True},
        {"query": "refund", "cursor": None},
        '{"order_id":"A12","include_items":true}',
        "{'a': 1}",
        {"name": "café 😀", "n": 0.1, "m": 1.0, "big": 2**70},
        [3, 2, 1],
    ]
    for _ in range(20):
        out.append({f"k{rnd.randrange(100)}": rnd.random() for _ in range(rnd.randrange(1, 6))})
    return out


def _run_child(env_extra: dict[str, str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_LOOPGUARD_")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps(_payloads()),
        capture_output=True,
        text=True,
        env=env,
        cwd=str(REPO),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.real  # starts a process
def test_same_key_gives_same_digests_across_processes() -> None:
    secret = "cross-process-secret-value-0123456789"
    child = _run_child({"OTEL_LOOPGUARD_KEY": secret, "PYTHONHASHSEED": "12345"})
    from otel_loopguard.canon import load_key

    key = load_key({"OTEL_LOOPGUARD_KEY": secret})
    fp = Fingerprinter(key, Policy())
    payloads = _payloads() + [{"tags": {"epsilon", "delta", "gamma", "beta", "alpha"}}]
    assert child["key_id"] == key.key_id
    assert child["actions"] == [fp.action("lookup_order", p).digest for p in payloads]
    assert child["results"] == [fp.result("lookup_order", p).digest for p in payloads]
    assert secret not in json.dumps(child)

    other = _run_child({"OTEL_LOOPGUARD_KEY": secret + "-other", "PYTHONHASHSEED": "999"})
    assert other["key_id"] != key.key_id
    assert not set(other["actions"]) & set(child["actions"])
