"""The canonical form's second writer: values too deep for the recursive walk (or too
large for the encoder) are written iteratively, and must come out as the same text, with
the same tags for what is not JSON; only the flags say which writer ran.

The exact tag texts are part of the canonical form (docs/fingerprints.md: `\\u0000int:1`);
a change to them changes every digest of such values, so they are pinned here.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest

from otel_loopguard.canon import canonicalize
from otel_loopguard.canon.canonical import (
    NON_FINITE,
    NON_JSON_VALUE,
    NON_STRING_KEYS,
    TOO_DEEP,
    TOO_LARGE,
)


class Level(enum.IntEnum):
    HIGH = 3


class Color(str, enum.Enum):
    RED = "red"


class Ratio(float):
    pass


class Tag(str):
    pass


class Thing:
    def __str__(self) -> str:
        return "a thing"


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


VALUES: dict[str, Any] = {
    "objects and arrays": {"b": [1, 2.5, None, True, False, "é"], "a": {"y": 1, "x": [], "z": {}}, "c": ""},
    "non-string keys": {1: "a", None: [1], (1, 2): {"k": "v"}, 2.5: 0, "s": 1},
    "bytes": {"b": b"\x00\xff", "c": bytearray(b"ab")},
    "subclasses of JSON types": [Level.HIGH, Color.RED, Tag("t"), Ratio(1.5), True],
    "non-finite": [float("nan"), float("inf"), -float("inf")],
    "objects": [Thing(), Unprintable()],
    "tuples": (1, (2, 3), ()),
    "arrays in objects in arrays": {"a": [[1, [2]], {"b": [3, {"c": [4, 5]}]}], "d": [{}, []]},
    "keys beyond ASCII": {"ключ": {"é": 1, "z": 2}},
}


@pytest.mark.parametrize("name", VALUES)
@pytest.mark.parametrize("max_depth", [0, 1, 2])
def test_a_value_too_deep_for_the_walk_is_written_as_the_same_text(name: str, max_depth: int) -> None:
    value = VALUES[name]
    plain, deep = canonicalize(value), canonicalize(value, max_depth=max_depth)
    assert deep.text == plain.text
    assert deep.flags - {TOO_DEEP} == plain.flags
    assert TOO_DEEP in deep.flags or max_depth > 0


def test_the_iterative_writer_keeps_every_key_and_item_in_canonical_order() -> None:
    value = {"b": [1, {"y": 2, "x": [3, 4]}], "a": {"d": 5, "c": 6}}
    assert canonicalize(value, max_depth=0).text == '{"a":{"c":6,"d":5},"b":[1,{"x":[3,4],"y":2}]}'
    assert canonicalize([[], {}, [[]]], max_depth=0).text == "[[],{},[[]]]"
    assert canonicalize({"k": "é\n"}, max_depth=0).text == '{"k":"é\\n"}'  # not ASCII-escaped


def test_the_iterative_writer_drops_the_keys_to_drop() -> None:
    value = {"keep": {"drop": 1, "k": [{"drop": 2, "x": 3}]}, "drop": 4}
    c = canonicalize(value, max_depth=0, drop_keys=frozenset({"drop"}))
    assert c.text == '{"keep":{"k":[{"x":3}]}}'
    assert c.text == canonicalize(value, drop_keys=frozenset({"drop"})).text


def test_non_string_keys_are_tagged_with_their_type_and_repr() -> None:
    c = canonicalize({1: "a", None: "b", (1, 2): "c"})
    assert json.loads(c.text) == {"\x00int:1": "a", "\x00NoneType:None": "b", "\x00tuple:(1, 2)": "c"}
    assert c.flags == {NON_STRING_KEYS}
    assert canonicalize({1: "v"}).text != canonicalize({2: "v"}).text


def test_values_that_are_not_json_are_tagged_with_their_type() -> None:
    c = canonicalize({"b": b"\x00\xff", "o": Thing(), "u": Unprintable(), "f": frozenset({2, 1})})
    assert json.loads(c.text) == {"b": "\x00bytes:00ff", "o": "\x00Thing:a thing", "u": "\x00Unprintable:<unprintable>",
                                  "f": {"\x00set": [1, 2]}}
    assert c.flags == {NON_JSON_VALUE}


def test_a_cycle_is_tagged_where_it_closes() -> None:
    d: dict[str, Any] = {"x": 1}
    d["self"] = d
    c = canonicalize(d)
    assert json.loads(c.text) == {"self": "\x00cycle", "x": 1}
    assert c.flags == {TOO_DEEP, NON_JSON_VALUE}
    items: list[Any] = [1]
    items.append(items)
    assert json.loads(canonicalize(items).text) == [1, "\x00cycle"]
    # the same object twice side by side is no cycle
    shared = {"k": 1}
    twice = canonicalize([shared, shared], max_depth=0)
    assert twice.text == '[{"k":1},{"k":1}]' and twice.flags == {TOO_DEEP}


def test_integers_beyond_the_digit_limit_are_written_in_hex() -> None:
    big = 10**5000
    c = canonicalize({"n": big})
    assert json.loads(c.text) == {"n": "\x00" + hex(big)}
    assert c.flags == {NON_JSON_VALUE, TOO_LARGE}
    deep = canonicalize({"n": [big]}, max_depth=0)
    assert json.loads(deep.text) == {"n": ["\x00" + hex(big)]}
    assert deep.flags == {TOO_DEEP, NON_JSON_VALUE}


def test_a_leaf_that_is_itself_too_deep_for_one_level_is_tagged_by_type() -> None:
    # a set of tuples past the depth limit: written as its type alone, and flagged
    c = canonicalize([{(1, 2)}], max_depth=0)
    assert json.loads(c.text) == ["\x00set"]
    assert c.flags == {TOO_DEEP, NON_JSON_VALUE}


def test_non_finite_numbers_in_deep_values_are_flagged() -> None:
    c = canonicalize([[float("nan")]], max_depth=0)
    assert c.text == "[[NaN]]"
    assert c.flags == {TOO_DEEP, NON_FINITE}


def test_set_items_are_sorted_by_their_canonical_text_not_its_ascii_escape() -> None:
    # "é" sorts after "z" by code point; escaped as \u00e9 it would sort before
    assert json.loads(canonicalize({"s": {"é", "z", "a"}}).text) == {"s": {"\x00set": ["a", "z", "é"]}}


def test_non_finite_numbers_in_a_set_are_flagged_as_such() -> None:
    c = canonicalize({"s": {float("inf"), 1}})
    assert c.text == '{"s":{"\\u0000set":[1,Infinity]}}'
    assert c.flags == {NON_JSON_VALUE, NON_FINITE}


def test_a_float_subclass_keeps_its_non_finite_flag() -> None:
    c = canonicalize({"r": Ratio(float("nan")), "i": Level.HIGH, "t": Tag("x")})
    assert c.text == '{"i":3,"r":NaN,"t":"x"}'
    assert c.flags == {NON_FINITE}


# --- parse: which text is JSON -----------------------------------------------------------


def test_json_text_of_objects_nested_past_the_text_limit_is_opaque() -> None:
    from otel_loopguard.canon.canonical import MAX_TEXT_DEPTH, OPAQUE_TEXT, parse

    deep = '{"a":' * (MAX_TEXT_DEPTH + 1) + "1" + "}" * (MAX_TEXT_DEPTH + 1)
    assert parse(deep).flags == {OPAQUE_TEXT, TOO_DEEP} and parse(deep).form == "text"
    within = '{"a":' * MAX_TEXT_DEPTH + "1" + "}" * MAX_TEXT_DEPTH
    assert parse(within).form == "json" and parse(within).flags == frozenset()


def test_only_json_whitespace_may_precede_json_text() -> None:
    from otel_loopguard.canon.canonical import PROSE, parse

    assert parse(' \t\n\r{"a": 1}').value == {"a": 1}
    # a no-break space is not JSON whitespace: prose, settled by its first character
    # (and so kept by the fingerprinter's memo, unlike text a decode refused)
    assert parse('\u00a0{"a": 1}').flags is PROSE


def test_a_json_string_holding_indented_json_is_parsed_twice() -> None:
    from otel_loopguard.canon.canonical import DOUBLE_ENCODED, parse

    p = parse(json.dumps(' \n{"b": 1, "a": 2}'))
    assert p.value == {"a": 2, "b": 1} and p.flags == {DOUBLE_ENCODED}


def test_a_str_subclass_holding_json_text_is_parsed_like_str() -> None:
    assert canonicalize(Tag('{"b": 1, "a": [2]}')).text == '{"a":[2],"b":1}'
    assert canonicalize(Tag("plain words")).form == "text"


def test_any_mapping_is_an_object() -> None:
    from types import MappingProxyType

    c = canonicalize({"m": MappingProxyType({"b": 1, "a": 2})})
    assert (c.text, c.flags) == ('{"m":{"a":2,"b":1}}', frozenset())


def test_set_items_are_walked_as_json_and_sorted_by_their_text() -> None:
    c = canonicalize({"f": frozenset({(3,), (1, 2)}), "n": {9, 10}})
    # by canonical text: "10" before "9", "[1,2]" before "[3]"
    assert c.text == '{"f":{"\\u0000set":[[1,2],[3]]},"n":{"\\u0000set":[10,9]}}'
    assert c.flags == {NON_JSON_VALUE}


def test_set_items_count_towards_the_depth() -> None:
    value = {"f": frozenset({(1, 2)})}  # object, set, array: three levels
    assert canonicalize(value, max_depth=3).flags == {NON_JSON_VALUE}
    assert canonicalize(value, max_depth=2).flags == {NON_JSON_VALUE, TOO_DEEP}


class Mängd(frozenset):  # type: ignore[type-arg]
    pass


def test_a_set_left_for_the_iterative_writer_keeps_its_items() -> None:
    c = canonicalize([{2, 1}], max_depth=0)
    assert json.loads(c.text) == [{"\x00set": [1, 2]}]
    assert c.flags == {TOO_DEEP, NON_JSON_VALUE}
    # one too deep for a single level: its type's name alone, unescaped
    tagged = canonicalize([Mängd({(1,)})], max_depth=0)
    assert tagged.text == '["\\u0000Mängd"]'
