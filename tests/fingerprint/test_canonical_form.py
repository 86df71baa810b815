"""Canonical form of arguments and results (otel_loopguard.canon.canonical).

Rules under test (seed 000, docs/fingerprints.md): JSON text is parsed, object
keys are sorted, array order is kept, separators are compact, output is UTF-8
without ASCII escaping. Nothing else is normalised: no whitespace folding, no
case folding, no rounding. What cannot be represented faithfully carries a flag
instead of raising or colliding silently.
"""

from __future__ import annotations

import enum
import json
import math
import re
import signal
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from otel_loopguard.canon import Canonical, canonicalize
from otel_loopguard.canon.canonical import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    DOUBLE_ENCODED,
    DUPLICATE_KEYS,
    NON_FINITE,
    NON_JSON_VALUE,
    NON_STRING_KEYS,
    OPAQUE_TEXT,
    TOO_DEEP,
    MAX_TEXT_DEPTH,
    TOO_LARGE,
    parse,
)


def text(value: Any, **options: Any) -> str:
    return canonicalize(value, **options).text


def nested_lists(depth: int, leaf: Any = 0) -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_dicts(depth: int, leaf: Any, reverse: bool = False) -> Any:
    """`depth` levels of {"a": <child>, "b": <level>}, with either key order."""
    value: Any = leaf
    for level in range(depth):
        value = {"b": level, "a": value} if reverse else {"a": value, "b": level}
    return value


# --- the documented constants and flag names -------------------------------------


def test_flag_names_and_limits_are_the_documented_ones() -> None:
    assert (OPAQUE_TEXT, DOUBLE_ENCODED, DUPLICATE_KEYS, NON_FINITE) == (
        "opaque_text",
        "double_encoded",
        "duplicate_keys",
        "non_finite_number",
    )
    assert (NON_STRING_KEYS, NON_JSON_VALUE, TOO_DEEP, TOO_LARGE) == (
        "non_string_keys",
        "non_json_value",
        "too_deep",
        "too_large",
    )
    assert DEFAULT_MAX_DEPTH == 64
    assert DEFAULT_MAX_BYTES == 256 * 1024


def test_result_is_a_canonical_record_with_form_text_and_flags() -> None:
    c = canonicalize({"a": 1})
    assert isinstance(c, Canonical)
    assert (c.form, c.text, c.flags) == ("json", '{"a":1}', frozenset())


# --- key order never matters, array order always does ----------------------------


def test_seed_example_key_order_does_not_matter() -> None:
    a = canonicalize({"order_id": "A12", "include_items": True})
    b = canonicalize({"include_items": True, "order_id": "A12"})
    assert a.text == b.text == '{"include_items":true,"order_id":"A12"}'


def test_key_order_does_not_matter_in_json_text_either() -> None:
    a = canonicalize('{"order_id":"A12","include_items":true}')
    b = canonicalize('{ "include_items" : true,\n  "order_id": "A12" }')
    assert a == b
    assert a.text == '{"include_items":true,"order_id":"A12"}'


def test_nested_key_order_does_not_matter() -> None:
    a = {"outer": {"z": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": None}}, "b": 0}
    b = {"b": 0, "outer": {"a": {"x": None, "y": [1, {"p": 2, "q": 1}]}, "z": 1}}
    assert text(a) == text(b) == '{"b":0,"outer":{"a":{"x":null,"y":[1,{"p":2,"q":1}]},"z":1}}'


def test_array_order_is_kept() -> None:
    assert text([1, 2, 3]) == "[1,2,3]"
    assert text([1, 2, 3]) != text([3, 2, 1])
    assert text({"ids": ["a", "b"]}) != text({"ids": ["b", "a"]})
    assert text('{"ids":["a","b"]}') != text('{"ids":["b","a"]}')


def test_tuples_are_arrays() -> None:
    assert text({"a": (1, 2)}) == text({"a": [1, 2]}) == '{"a":[1,2]}'


def test_keys_sort_by_code_point() -> None:
    assert text({"b": 1, "B": 2, "a": 3, "é": 4, "A": 5}) == '{"A":5,"B":2,"a":3,"b":1,"é":4}'


# --- compact separators, UTF-8, no folding ---------------------------------------


def test_separators_are_compact_and_insignificant_whitespace_is_gone() -> None:
    assert text('{ "a" : [ 1 , 2 ] ,\n\t"b" : { } }') == '{"a":[1,2],"b":{}}'
    assert text({"a": [1, 2], "b": {}}) == '{"a":[1,2],"b":{}}'


def test_output_is_utf8_without_ascii_escaping() -> None:
    c = canonicalize({"name": "café ☃ 😀 Ω"})
    assert c.text == '{"name":"café ☃ 😀 Ω"}'
    assert "\\u" not in c.text
    # The escaped and the literal spelling of one character are the same JSON string.
    assert text('{"name":"caf\\u00e9 \\ud83d\\ude00"}') == '{"name":"café 😀"}'


def test_whitespace_inside_strings_is_not_folded() -> None:
    assert text({"q": "a  b"}) != text({"q": "a b"})
    assert text({"q": " a"}) != text({"q": "a"})
    assert text({"q": "a\n"}) != text({"q": "a"})
    assert text({"q": "a\tb"}) != text({"q": "a b"})


def test_case_is_not_folded() -> None:
    assert text({"email": "Bob@Example.com"}) != text({"email": "bob@example.com"})
    assert text({"Email": "x"}) != text({"email": "x"})
    assert '"Bob@Example.com"' in text({"email": "Bob@Example.com"})


def test_numbers_are_not_rounded() -> None:
    assert text(1.0) == "1.0"
    assert text(1) == "1"
    assert text({"x": 1.0}) != text({"x": 1})
    assert text('{"x":1.0}') != text('{"x":1}')
    assert text({"x": 0.1}) == '{"x":0.1}'
    assert text('{"x":0.1}') == '{"x":0.1}'
    assert text({"lat": 52.520008, "lon": 13.404954}) == '{"lat":52.520008,"lon":13.404954}'
    # Adjacent doubles stay distinct: nothing is rounded to fewer digits.
    assert text(0.1) != text(math.nextafter(0.1, 1.0))
    assert float(text(math.nextafter(0.1, 1.0))) == math.nextafter(0.1, 1.0)
    # Integers beyond 64 bits stay exact.
    assert text('{"n":18446744073709551617}') == '{"n":18446744073709551617}'
    assert text(-0.0) != text(0.0)


def test_booleans_and_null_differ_from_numbers_and_strings() -> None:
    forms = [True, 1, "true", None, "null", 0, False, "", [], {}]
    texts = [text({"v": v}) for v in forms]
    assert len(set(texts)) == len(forms)


# --- JSON text is parsed; non-JSON text is opaque --------------------------------


def test_json_text_is_parsed() -> None:
    assert canonicalize('{"a": 1}') == canonicalize({"a": 1})
    assert canonicalize("[1, 2]") == canonicalize([1, 2])
    assert canonicalize("  42  ") == canonicalize(42)
    assert canonicalize('"hello"') == Canonical("json", '"hello"', frozenset())


def test_double_encoded_json_is_parsed_twice_and_flagged() -> None:
    inner = json.dumps({"b": 2, "a": 1})
    c = canonicalize(json.dumps(inner))
    assert c.form == "json"
    assert c.text == '{"a":1,"b":2}'
    assert c.flags == {DOUBLE_ENCODED}
    arr = canonicalize(json.dumps(json.dumps([1, 2])))
    assert (arr.text, arr.flags) == ("[1,2]", {DOUBLE_ENCODED})


def test_a_json_string_that_is_not_json_inside_stays_a_string() -> None:
    c = canonicalize(json.dumps("{not json"))
    assert (c.form, c.text, c.flags) == ("json", '"{not json"', frozenset())
    plain = canonicalize(json.dumps("hello"))
    assert (plain.text, plain.flags) == ('"hello"', frozenset())


@pytest.mark.parametrize(
    "raw",
    [
        "hello world",
        "{'a': 1}",  # a Python repr, not JSON: never guessed
        "['a', 'b']",
        "True",
        "None",
        "{a: 1}",
        "[1, 2,]",
        "",
        "   ",
        "'single'",
        "{\"a\": 1} trailing",
    ],
)
def test_non_json_text_is_opaque_and_kept_exactly(raw: str) -> None:
    c = canonicalize(raw)
    assert c.form == "text"
    assert c.text == raw
    assert c.flags == {OPAQUE_TEXT}


def test_python_repr_is_not_mistaken_for_the_dict_it_prints() -> None:
    assert canonicalize("{'a': 1}") != canonicalize({"a": 1})
    assert canonicalize("{'a': 1}").text != canonicalize({"a": 1}).text


def test_opaque_text_keeps_whitespace_and_case() -> None:
    assert canonicalize("Hello  World").text == "Hello  World"
    assert canonicalize("Hello  World") != canonicalize("hello world")


# --- non-finite numbers ----------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_python_non_finite_floats_are_flagged(value: float) -> None:
    c = canonicalize({"x": value})
    assert NON_FINITE in c.flags
    assert c.form == "json"


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_tokens_in_json_text_are_flagged(token: str) -> None:
    c = canonicalize('{"x": %s}' % token)
    assert c.flags == {NON_FINITE}
    assert c.text == '{"x":%s}' % token


def test_non_finite_numbers_differ_from_the_strings_that_name_them() -> None:
    for token, value in (("NaN", float("nan")), ("Infinity", float("inf")), ("-Infinity", float("-inf"))):
        number = canonicalize({"x": value})
        string = canonicalize({"x": token})
        assert number.text != string.text
        assert NON_FINITE in number.flags
        assert string.flags == frozenset()
        assert canonicalize('{"x":"%s"}' % token).flags == frozenset()
        assert canonicalize('{"x":"%s"}' % token).text != canonicalize('{"x":%s}' % token).text


def test_nan_is_deterministic() -> None:
    assert text({"x": float("nan")}) == text({"x": float("nan")}) == '{"x":NaN}'


def test_overflowing_json_number_is_flagged_non_finite() -> None:
    c = canonicalize('{"x": 1e400}')
    assert NON_FINITE in c.flags


# --- non-string keys, non-JSON values --------------------------------------------


@pytest.mark.parametrize(
    "key, string_key",
    [(1, "1"), (1.5, "1.5"), (None, "None"), (None, "null"), (True, "True"), (True, "true"), ((1, 2), "(1, 2)")],
)
def test_non_string_keys_are_flagged_and_never_collide_with_string_keys(key: Any, string_key: str) -> None:
    tagged = canonicalize({key: "v"})
    plain = canonicalize({string_key: "v"})
    assert NON_STRING_KEYS in tagged.flags
    assert NON_STRING_KEYS not in plain.flags
    assert tagged.text != plain.text


def test_int_and_float_keys_stay_distinct() -> None:
    assert text({1: "v"}) != text({1.5: "v"})
    assert text({1: "v"}) != text({True: "v"})


def test_non_string_keys_are_order_independent() -> None:
    assert text({1: "a", "b": 2, None: 3}) == text({None: 3, "b": 2, 1: "a"})


@pytest.mark.parametrize(
    "value",
    [
        {1, 2, 3},
        frozenset({"a"}),
        b"raw bytes",
        bytearray(b"raw"),
        object(),
        complex(1, 2),
    ],
    ids=["set", "frozenset", "bytes", "bytearray", "object", "complex"],
)
def test_non_json_values_are_flagged(value: Any) -> None:
    c = canonicalize({"v": value})
    assert NON_JSON_VALUE in c.flags
    assert c.form == "json"


def test_non_json_values_never_equal_their_json_lookalikes() -> None:
    assert text({"v": {1, 2}}) != text({"v": [1, 2]})
    assert text({"v": b"ab"}) != text({"v": "ab"})
    assert text({"v": b"ab"}) != text({"v": "6162"})
    assert text({"v": frozenset()}) != text({"v": []})


def test_sets_are_canonical_whatever_their_iteration_order() -> None:
    a = {"v": {"x", "y", "z", "w"}}
    b = {"v": {"w", "z", "y", "x"}}
    assert text(a) == text(b)
    assert text({"v": {3, 1, 2}}) == text({"v": {1, 2, 3}})
    assert text({"v": {1, 2}}) != text({"v": {1, 3}})


def test_bytes_are_kept_exactly() -> None:
    assert text({"v": b"\x00\x01"}) != text({"v": b"\x00\x02"})


def test_int_enum_serialises_as_its_value() -> None:
    class Level(enum.IntEnum):
        HIGH = 3

    assert text({"level": Level.HIGH}) == text({"level": 3}) == '{"level":3}'


def test_str_subclass_serialises_as_its_value() -> None:
    class Tag(str):
        pass

    assert text({"t": Tag("x")}) == '{"t":"x"}'


def test_str_enum_serialises_as_its_value() -> None:
    class Color(str, enum.Enum):
        RED = "red"

    assert text({"c": Color.RED}) == '{"c":"red"}'


# --- duplicate keys --------------------------------------------------------------


def test_duplicate_keys_are_flagged_and_the_last_one_wins() -> None:
    c = canonicalize('{"a": 1, "a": 2}')
    assert c.text == '{"a":2}'
    assert c.flags == {DUPLICATE_KEYS}
    nested = canonicalize('{"o": {"k": "x", "k": "y"}, "z": 0}')
    assert nested.text == '{"o":{"k":"y"},"z":0}'
    assert DUPLICATE_KEYS in nested.flags
    assert canonicalize('{"a": 1, "b": 2}').flags == frozenset()


def test_a_plain_string_that_only_looks_like_json_gets_no_flags() -> None:
    assert canonicalize(json.dumps('{"a":1,"a":2} x')).flags == frozenset()
    assert canonicalize(json.dumps("[NaN] x")).flags == frozenset()


# --- depth ------------------------------------------------------------------------


def test_nesting_within_max_depth_is_not_flagged() -> None:
    assert TOO_DEEP not in canonicalize(nested_lists(DEFAULT_MAX_DEPTH - 1)).flags


def test_nesting_beyond_max_depth_is_flagged_and_serialised_the_same_way() -> None:
    deep = nested_lists(DEFAULT_MAX_DEPTH + 5)
    c = canonicalize(deep)
    assert TOO_DEEP in c.flags
    assert c.form == "json"
    assert c.text == "[" * (DEFAULT_MAX_DEPTH + 5) + "0" + "]" * (DEFAULT_MAX_DEPTH + 5)


def test_max_depth_option_is_honoured() -> None:
    c = canonicalize({"a": {"b": {"c": 1}}}, max_depth=2)
    assert TOO_DEEP in c.flags
    assert c.text == '{"a":{"b":{"c":1}}}'
    assert TOO_DEEP not in canonicalize({"a": {"b": {"c": 1}}}, max_depth=3).flags


def test_too_deep_objects_are_still_key_order_independent() -> None:
    a, b = nested_dicts(100, "leaf"), nested_dicts(100, "leaf", reverse=True)
    ca, cb = canonicalize(a), canonicalize(b)
    assert TOO_DEEP in ca.flags
    assert ca.text == cb.text
    assert canonicalize(nested_dicts(100, "other")).text != ca.text


def test_5000_levels_of_python_objects_do_not_raise() -> None:
    for value in (nested_lists(5000), nested_dicts(5000, "leaf")):
        c = canonicalize(value)
        assert TOO_DEEP in c.flags
        assert c.form == "json"
        assert c == canonicalize(value)  # deterministic


def test_5000_levels_of_python_objects_are_key_order_independent_and_collision_free() -> None:
    a = canonicalize(nested_dicts(5000, "leaf"))
    b = canonicalize(nested_dicts(5000, "leaf", reverse=True))
    assert a.text == b.text
    assert canonicalize(nested_dicts(5000, "other")).text != a.text
    assert canonicalize(nested_lists(5000, 1)).text != canonicalize(nested_lists(5000, 2)).text
    assert canonicalize(nested_lists(5000)).text != canonicalize(nested_lists(4999)).text


def test_dropped_keys_go_at_every_depth_on_the_slow_path_too() -> None:
    dropped = canonicalize(nested_dicts(5000, "leaf"), drop_keys=frozenset({"b"}))
    assert TOO_DEEP in dropped.flags
    assert dropped.text == '{"a":' * 5000 + '"leaf"' + "}" * 5000


def test_5000_levels_of_json_text_do_not_raise() -> None:
    deep_array = "[" * 5000 + "]" * 5000
    c = canonicalize(deep_array)
    assert TOO_DEEP in c.flags
    assert c == canonicalize(deep_array)  # deterministic
    deep_object = '{"a":' * 5000 + "1" + "}" * 5000
    other_object = '{"a":' * 5000 + "2" + "}" * 5000
    co = canonicalize(deep_object)
    assert TOO_DEEP in co.flags
    assert co.text != canonicalize(other_object).text
    assert canonicalize(deep_array).text != canonicalize("[" * 4999 + "]" * 4999).text


def test_deep_json_text_within_the_parser_limit_is_key_order_independent() -> None:
    a = json.dumps(nested_dicts(200, "leaf"))
    b = json.dumps(nested_dicts(200, "leaf", reverse=True))
    assert a != b
    ca, cb = canonicalize(a), canonicalize(b)
    assert ca.form == cb.form == "json"
    assert TOO_DEEP in ca.flags
    assert ca.text == cb.text


def _at_stack_depth(frames: int, fn: Any) -> Any:
    if frames == 0:
        return fn()
    return _at_stack_depth(frames - 1, fn)


def test_parsing_does_not_depend_on_the_callers_stack_depth() -> None:
    limit = sys.getrecursionlimit()
    for share in (0.3, 0.5, 0.7):
        levels = int(limit * share)
        payload = "[" * levels + "]" * levels
        shallow = canonicalize(payload)
        deep = _at_stack_depth(int(limit * 0.4), lambda: canonicalize(payload))
        assert (shallow.form, shallow.text) == (deep.form, deep.text)


class _Timeout(BaseException):
    pass


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout(f"no answer within {seconds}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _cyclic_dict() -> Any:
    d: dict[str, Any] = {"x": 1}
    d["self"] = d
    return d


def _cyclic_list() -> Any:
    items: list[Any] = [1]
    items.append(items)
    return items


@pytest.mark.parametrize("make", [_cyclic_dict, _cyclic_list], ids=["dict", "list"])
def test_cyclic_values_return_promptly(make: Any) -> None:
    value = make()
    try:
        with _time_limit(0.5):
            c = canonicalize(value)
    except _Timeout:
        pytest.fail("canonicalize did not return for a cyclic value")
    assert c.flags & {TOO_DEEP, NON_JSON_VALUE}


# --- size -------------------------------------------------------------------------


def test_text_over_max_bytes_is_opaque_and_flagged_too_large() -> None:
    big = json.dumps({"blob": "x" * DEFAULT_MAX_BYTES})
    c = canonicalize(big)
    assert c.form == "text"
    assert c.text == big
    assert c.flags == {OPAQUE_TEXT, TOO_LARGE}


def test_max_bytes_option_is_honoured() -> None:
    small = canonicalize('{"a": 1}', max_bytes=4)
    assert (small.form, small.flags) == ("text", {OPAQUE_TEXT, TOO_LARGE})
    at_limit = canonicalize('{"a":1}', max_bytes=len('{"a":1}'))
    assert (at_limit.form, at_limit.flags) == ("json", frozenset())


def test_too_large_texts_stay_distinct() -> None:
    a = json.dumps({"blob": "x" * DEFAULT_MAX_BYTES, "k": 1})
    b = json.dumps({"blob": "x" * DEFAULT_MAX_BYTES, "k": 2})
    assert canonicalize(a).text != canonicalize(b).text


def test_max_bytes_counts_utf8_bytes() -> None:
    payload = json.dumps({"blob": "€" * 100_000}, ensure_ascii=False)
    assert len(payload.encode("utf-8")) > DEFAULT_MAX_BYTES
    assert TOO_LARGE in canonicalize(payload).flags


# --- huge integers ----------------------------------------------------------------


def test_huge_integers_do_not_raise_and_stay_distinct() -> None:
    big = 10**5000
    a = canonicalize(big)
    b = canonicalize(big + 1)
    assert a.form == "json"
    assert a.text != b.text
    assert a.flags  # never silently re-spelled
    nested = canonicalize({"n": [big], "m": "x"})
    assert nested.flags
    assert nested.text != canonicalize({"n": [big + 1], "m": "x"}).text
    assert canonicalize({"m": "x", "n": [big]}).text == nested.text
    assert canonicalize({"n": {big}}).flags


def test_huge_integer_json_text_does_not_raise() -> None:
    digits = "1" * 5000
    c = canonicalize(digits)
    assert c.flags  # opaque or tagged, but flagged
    assert c.text != canonicalize("1" * 5001).text
    assert canonicalize('{"n": %s}' % digits).text != canonicalize('{"n": %s2}' % digits[:-1]).text


def test_huge_integer_key_does_not_raise() -> None:
    c = canonicalize({10**5000: 1})
    assert NON_STRING_KEYS in c.flags


class _BrokenStr:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


def test_object_with_failing_str_does_not_raise() -> None:
    c = canonicalize({"v": _BrokenStr()})
    assert NON_JSON_VALUE in c.flags


# --- bytes at the top level --------------------------------------------------------


def test_top_level_bytes_are_read_as_utf8_text() -> None:
    assert canonicalize(b'{"b":1,"a":2}').text == '{"a":2,"b":1}'
    assert canonicalize(bytearray(b"[1,2]")).text == "[1,2]"
    raw = canonicalize(b"\xff\xfe not utf8")
    assert raw.form == "text"
    assert OPAQUE_TEXT in raw.flags


# --- how deep JSON text nests, before any decoder sees it -------------------------------


def _parsed(value: str) -> tuple[str, frozenset[str]]:
    p = parse(value)
    return p.form, p.flags


def test_json_text_nested_exactly_to_the_text_limit_is_parsed_and_one_more_is_opaque() -> None:
    assert _parsed("[" * MAX_TEXT_DEPTH + "]" * MAX_TEXT_DEPTH) == ("json", frozenset())
    deeper = "[" * (MAX_TEXT_DEPTH + 1) + "]" * (MAX_TEXT_DEPTH + 1)
    assert _parsed(deeper) == ("text", frozenset({OPAQUE_TEXT, TOO_DEEP}))


def test_many_brackets_side_by_side_are_not_depth() -> None:
    """Far more brackets than the limit, two levels deep: plain JSON."""
    shallow = json.dumps([[i] for i in range(3 * MAX_TEXT_DEPTH)])
    assert _parsed(shallow) == ("json", frozenset())
    assert parse(shallow).value == [[i] for i in range(3 * MAX_TEXT_DEPTH)]


def test_depth_goes_back_down_as_brackets_close() -> None:
    """A branch that closes gives its levels back: the next branch's depth counts from
    where the closing left off, not from zero and not from the deepest point."""
    def nest(depth: int) -> Any:
        return nested_lists(depth, 0)

    half = MAX_TEXT_DEPTH // 4
    # half wrappers, the pair's own list, then the second branch: the limit + 1 levels
    over = nested_lists(half, [nest(half), nest(MAX_TEXT_DEPTH - half)])
    assert _parsed(json.dumps(over))[1] == frozenset({OPAQUE_TEXT, TOO_DEEP})
    within = nested_lists(half, [nest(half), nest(MAX_TEXT_DEPTH - half - 1)])  # exactly the limit
    assert _parsed(json.dumps(within)) == ("json", frozenset())


def test_brackets_inside_strings_are_not_nesting() -> None:
    inside = json.dumps(["[" * (2 * MAX_TEXT_DEPTH), "{" * (2 * MAX_TEXT_DEPTH)])
    assert _parsed(inside) == ("json", frozenset())


# --- values JSON has no form for: a fixed text, at any depth ---------------------------------


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _Accented:
    def __repr__(self) -> str:
        return "é-obj"


def test_values_json_cannot_hold_have_a_fixed_canonical_text() -> None:
    """Sets sort by their members' JSON text (unescaped, so "z" before "é"); other objects are
    their type and repr, and an object whose repr fails is still one fixed text."""
    assert text({"z", "é"}) == '{"\\u0000set":["z","é"]}'
    assert text(_Accented()) == '"\\u0000_Accented:é-obj"'
    assert text(_Unprintable()) == '"\\u0000_Unprintable:<unprintable>"'


def test_values_json_cannot_hold_keep_their_text_beyond_max_depth() -> None:
    deep = canonicalize(nested_lists(DEFAULT_MAX_DEPTH + 5, _Accented()))
    assert TOO_DEEP in deep.flags
    assert deep.text.endswith('"\\u0000_Accented:é-obj"' + "]" * (DEFAULT_MAX_DEPTH + 5))
    deep_set = canonicalize(nested_lists(DEFAULT_MAX_DEPTH + 5, {"z", "é"}))
    # (the leaf past max_depth keeps json.dumps' default separators; the order is what counts)
    assert re.search(r'\{"\\u0000set": ?\["z", ?"é"\]\}', deep_set.text), deep_set.text
