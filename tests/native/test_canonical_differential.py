"""One answer, two implementations: the Rust module's canonical form of text payloads equals
the Python reference (canonical.parse then serialise) byte for byte, flags included, on the
committed captures and fixtures, the Rust side's corpus, generated JSON and odd text."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
from hypothesis import HealthCheck, example, given, settings
from tiers import examples
from hypothesis import strategies as st

from otel_loopguard.canon import canonical as canon
from otel_loopguard.canon import rust as native

ROOT = Path(__file__).resolve().parents[2]
# LOOPGUARD_DIFF_EXAMPLES raises the examples per property for a long run (docs/testing.md, "Long runs").
EXAMPLES = int(os.environ.get("LOOPGUARD_DIFF_EXAMPLES", examples(300)))
PROPS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VOLATILE = frozenset({"timestamp", "request_id", "trace_id", "span_id", "nonce", "created_at"})
ODD_DROPS = frozenset({"a", "b/c", 'q"', "\\", "é", "x\ny"})
LIMITS = (canon.DEFAULT_MAX_BYTES, canon.DEFAULT_MAX_DEPTH)


def python_form(value: Any, drop: frozenset[str], max_bytes: int, max_depth: int) -> tuple[str, bytes, frozenset[str]]:
    parsed = canon.parse(value, max_bytes=max_bytes)
    c = canon.serialise(parsed, drop_keys=drop, max_depth=max_depth)
    return c.form, c.text.encode("utf-8", "surrogatepass"), c.flags


def assert_same(value: Any, drop: frozenset[str] = frozenset(), max_bytes: int = LIMITS[0],
                max_depth: int = LIMITS[1]) -> Optional[tuple[str, bytes, frozenset[str]]]:
    got = native.canonical(value, drop, max_bytes, max_depth)
    if got is None:  # only text with lone surrogates is left to the Python path
        assert isinstance(value, str) and _has_surrogate(value), repr(value)[:200]
        return None
    want = python_form(value, drop, max_bytes, max_depth)
    assert got == want, (repr(value)[:300], got, want)
    # the memo keeps prose by identity (fingerprinter._kept): the native flags must be PROSE too
    assert (got[2] is canon.PROSE) == (canon.parse(value, max_bytes=max_bytes).flags is canon.PROSE)
    return got


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


# --- committed captures, fixtures and the Rust corpus -------------------------------------

def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def _corpus() -> list[str]:
    texts: set[str] = set()
    for path in sorted((ROOT / "research/conventions/captures").rglob("*.json")):
        raw = path.read_text(encoding="utf-8")
        texts.add(raw)
        texts.update(_strings(json.loads(raw)))
    for path in sorted((ROOT / "tests/fixtures").rglob("*")):
        if path.suffix in (".json", ".ndjson"):
            for line in path.read_text(encoding="utf-8").splitlines():
                texts.add(line)
                try:
                    texts.update(_strings(json.loads(line)))
                except ValueError:
                    pass
    for path in sorted((ROOT / "native/corpus").glob("*")):
        texts.add(path.read_bytes().decode("utf-8", "surrogatepass"))
    return sorted(texts)


CORPUS = _corpus()


def test_the_corpus_is_real() -> None:
    # a moved captures folder must not turn the corpus tests into no-ops
    assert len(CORPUS) > 1000
    assert sum(1 for t in CORPUS if t[:1] in "{[") > 200


@pytest.mark.parametrize("drop", [frozenset(), VOLATILE, ODD_DROPS], ids=["none", "volatile", "odd"])
def test_captures_fixtures_and_corpus(drop: frozenset[str]) -> None:
    kinds: set[str] = set()
    for text in CORPUS:
        got = assert_same(text, drop)
        if got is not None:
            kinds.add(got[0])
            kinds.update(got[2])
    assert {"json", "text", canon.OPAQUE_TEXT} <= kinds


# --- edges named one by one ---------------------------------------------------------------

EDGES = [
    "", " ", "\n{}", "{} ", " [1] \r\n", "[1,]", "{\"a\":1,}", "[01]", "-", "-0", "-0.0", "1e", "1.", "1.e5",
    "1E+2", "1e-400", "-1e-400", "1e400", "-1e400", "[NaN,Infinity,-Infinity]", "nan", "-Inf", "tru", "nul",
    "1e16", "1e15", "123456789012345678", "0.0001", "0.00001", "5e-324", "1.7976931348623157e308",
    "0.1e1", "[1.0,10E2,2.50]", "1000000000000000.2", "[1000000000000000.8,-1125899906842624.25]", "9" * 4300, "9" * 4301, "-" + "9" * 4300, "-" + "9" * 4301, "[" + "1" * 5000 + "]",
    '"\\ud83d\\ude00"', '"\\ud83d"', '"\\ude00\\ud83d"', '"\\ud83d\\u0041"', '"\\ud83dx"', '"\\ud83d\\uzzzz"',
    '"\\uD83D\\uDE00"', '{"\\ud800":1,"\\ue000":2,"\\U0001":3}', '{"\\ud800":1,"\\ue000":2,"\U0001f600":3}',
    '"a\\/b\\b\\f\\n\\r\\t\\"\\\\"', '"\x01"', '"\\u0001\\u001f\\u007f\\u0080"', '"tab\there"', "\"\\x41\"",
    '{"a":1,"a":2,"b":{"c":1,"c":[1,2]}}', '{"b":1,"a":2,"b":3}', "{'a': 1}", "{\"a\" 1}", "[1 2]",
    '"{\\"b\\":1,\\"a\\":2}"', '" {\\"b\\":1} "', '"\\u00a0{\\"b\\":1}"', '"{not json"', '"[1,2"', '"\\"x\\""',
    '"[NaN]"', '"{\\"a\\":1,\\"a\\":2}"', '"\\u005b\\u005b1\\u005d\\u005d"',
    '{"timestamp":1,"a":{"timestamp":2,"b":[{"nonce":3}]}}', '{"time\\u0073tamp":1}', '{"timestamp":NaN}',
    '{"timestamp":1e999}', '{"a":"Infinity"}', '{"NaN":1}', "\ufeff{}", "\u00e9", "{\"é\":\"日本\"}",
    "[" * 200 + "]" * 200, "[" * 201 + "]" * 201, "[" * 65 + "]" * 65, "[" * 64 + "]" * 64,
    '"' + "[" * 201 + '"', "[" * 201, "\"\\\n[" * 3, '["\\"' + "[" * 210 + '"]',
]


@pytest.mark.parametrize("text", EDGES, ids=range(len(EDGES)))
@pytest.mark.parametrize("drop", [frozenset(), VOLATILE, ODD_DROPS], ids=["none", "volatile", "odd"])
def test_edges(text: str, drop: frozenset[str]) -> None:
    assert assert_same(text, drop) is not None
    assert assert_same(text.encode("utf-8"), drop) is not None  # bytes that are UTF-8 alike


def test_the_edges_reach_every_flag() -> None:
    seen: set[str] = set()
    for text in EDGES:
        seen.update(python_form(text, VOLATILE, *LIMITS)[2])
    assert seen >= {canon.OPAQUE_TEXT, canon.DOUBLE_ENCODED, canon.DUPLICATE_KEYS, canon.NON_FINITE, canon.TOO_DEEP}


def test_the_integer_digit_limit_is_read_per_call() -> None:
    get = getattr(sys, "get_int_max_str_digits", None)
    if get is None:
        pytest.skip("this Python has no integer digit limit")
    before = get()
    try:
        sys.set_int_max_str_digits(1000)
        assert assert_same("[" + "7" * 1001 + "]")[2] == {canon.OPAQUE_TEXT}
        sys.set_int_max_str_digits(0)  # no limit
        assert assert_same("[" + "7" * 5000 + "]")[2] == frozenset()
    finally:
        sys.set_int_max_str_digits(before)


@pytest.mark.parametrize("max_bytes", [0, 1, 5, 6, 7, 20])
@pytest.mark.parametrize("max_depth", [0, 1, 2, 3])
def test_limits(max_bytes: int, max_depth: int) -> None:
    for text in ('{"a":[1]}', "[[[]]]", "é" * 3, '"\\ud800"', '[{"a":{"b":[]}}]', "[[1],[[2]]]"):
        assert_same(text, frozenset(), max_bytes, max_depth)
        assert_same(text, frozenset({"a"}), 1 << 20, max_depth)


def test_values_that_are_not_text_go_to_python() -> None:
    for value in ({"a": 1}, [1], 3, None, 1.5, b"\xff{}", bytearray(b"{}"), "lone \ud800 surrogate"):
        assert native.canonical(value, frozenset(), *LIMITS) is None


def test_a_drop_key_with_a_surrogate_goes_to_python() -> None:
    assert native.canonical("{}", frozenset({"\udc80"}), *LIMITS) is None


# --- generated payloads ---------------------------------------------------------------------

_chars = st.characters() | st.integers(0xD800, 0xDFFF).map(chr) | st.sampled_from('"\\/\b\f\n\r\t\x00\x1f\x7f\u2028é😀')
_text = st.text(_chars, max_size=10)
_floats = st.floats() | st.sampled_from([1e16, 1e-5, 1e-4, 1e22, 5e-324, 2.0**64, -0.0, 1e300, 123456789.0])
_ints = st.integers() | st.integers(-(2**200), 2**200) | st.sampled_from([0, -1, 2**63, -(2**64)])
_scalars = st.none() | st.booleans() | _ints | _floats | _text
json_values = st.recursive(
    _scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_text | st.sampled_from(sorted(VOLATILE)), kids, max_size=5),
    max_leaves=20,
)


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    value = draw(json_values)
    indent = draw(st.sampled_from([None, None, 0, 2]))
    text = json.dumps(value, ensure_ascii=draw(st.booleans()), sort_keys=draw(st.booleans()), indent=indent,
                      allow_nan=True)
    if draw(st.booleans()):  # double-encoded, the way some instrumentations write arguments
        text = json.dumps(text, ensure_ascii=draw(st.booleans()))
    return text


@PROPS
@given(json_texts(), st.sampled_from([frozenset(), VOLATILE, ODD_DROPS]))
@example('{"a":1}', frozenset())
def test_generated_json(text: str, drop: frozenset[str]) -> None:
    assert_same(text, drop)


_numbers = st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,4})?", fullmatch=True)


@PROPS
@given(st.lists(_numbers, min_size=1, max_size=5))
def test_numbers_at_the_edges(numbers: list[str]) -> None:
    assert_same("[" + ",".join(numbers) + "]")
    assert_same(numbers[0])


# Doubles exactly halfway between two shortest candidates: Python's repr takes the even last
# digit (1000000000000000.25 is "1000000000000000.2"), which Rust's shortest writer may not.
# In [2**50, 2**51) the spacing is 0.25, so k + 0.25 and k + 0.75 are such ties; scaled by
# powers of two they stay ties at other magnitudes when the shortest form has 16-17 digits.
_ties = st.builds(lambda k, frac, shift: math.ldexp(k + frac, shift), st.integers(2**50, 2**51 - 1),
                  st.sampled_from([0.25, 0.75]), st.integers(-1070, 960))


@PROPS
@given(st.floats(allow_nan=False, allow_infinity=False) | _ties)
@example(1000000000000000.2)
@example(1000000000000000.8)
def test_every_float_is_written_as_python_repr_writes_it(f: float) -> None:
    assert native.canonical(json.dumps(f), frozenset(), *LIMITS)[1] == repr(f).encode()


_odd_alphabet = st.sampled_from(list('{}[]",:\\/ \t\n-+.0123456789eEuabfnrtlsNIiy') + ["é", "😀", "\\u", "\\ud83d", "NaN"])


@PROPS
@given(st.lists(_odd_alphabet, max_size=30).map("".join), st.sampled_from([frozenset(), ODD_DROPS]))
def test_odd_text(text: str, drop: frozenset[str]) -> None:
    assert_same(text, drop)


@PROPS
@given(json_texts(), st.data())
def test_mutated_json(text: str, data: st.DataObject) -> None:
    """Valid JSON with one character changed, inserted or deleted: mostly errors, some not."""
    i = data.draw(st.integers(0, len(text)))
    piece = data.draw(_odd_alphabet)
    op = data.draw(st.sampled_from(["insert", "replace", "delete"]))
    if op == "insert":
        text = text[:i] + piece + text[i:]
    elif op == "replace":
        text = text[:i] + piece + text[i + 1:]
    else:
        text = text[:i] + text[i + 1:]
    assert_same(text, data.draw(st.sampled_from([frozenset(), VOLATILE])))


@PROPS
@given(st.integers(0, 70), st.integers(0, 70), st.sampled_from(["[", "{\"k\":"]), st.integers(0, 66))
def test_nesting_at_the_limits(opened: int, closed: int, opener: str, max_depth: int) -> None:
    closer = "]" if opener == "[" else "}"
    inner = "[" * 140  # with the openers: across MAX_TEXT_DEPTH
    assert_same(opener * opened + "1" + closer * closed, frozenset(), LIMITS[0], max_depth)
    assert_same(inner + opener * opened + "1" + closer * closed + "]" * 140, frozenset(), LIMITS[0], max_depth)
