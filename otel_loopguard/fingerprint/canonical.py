"""Canonical text of tool arguments and results.

Rules (docs/fingerprints.md): JSON text is parsed; object keys are sorted;
array order is kept; separators are compact; output is UTF-8 without ASCII
escaping. Nothing else is normalised here: no whitespace folding, no case
folding, no rounding. Whatever cannot be represented faithfully is marked with
a flag on the result instead of raising or colliding silently.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

# Flags a canonical form can carry. They are part of the public docs.
OPAQUE_TEXT = "opaque_text"  # not JSON: the exact text is hashed
DOUBLE_ENCODED = "double_encoded"  # a JSON string holding JSON, parsed twice
DUPLICATE_KEYS = "duplicate_keys"  # JSON object repeated a key: last one wins
NON_FINITE = "non_finite_number"  # NaN/Infinity: written as bare tokens
NON_STRING_KEYS = "non_string_keys"  # Python keys that are not str: tagged
NON_JSON_VALUE = "non_json_value"  # bytes, sets, objects: tagged
TOO_DEEP = "too_deep"  # nesting over the limit: serialised without parsing rules
TOO_LARGE = "too_large"  # text over the size limit: hashed as opaque text

DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_BYTES = 256 * 1024

# A tag prefix that no ordinary JSON string starts with; tagged values are
# always accompanied by a flag, so even a crafted collision is never silent.
_TAG = "\u0000"


@dataclass(frozen=True)
class Parsed:
    """A value after parsing: `form` is "json" or "text" (opaque)."""

    value: Any
    form: str
    flags: frozenset[str]


@dataclass(frozen=True)
class Canonical:
    form: str
    text: str
    flags: frozenset[str]


class _TooDeep(Exception):
    pass


def parse(value: Any, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Parsed:
    """Parse JSON text; keep anything else as it is. Never raises."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8", errors="surrogateescape")
    if not isinstance(value, str):
        return Parsed(value, "json", frozenset())
    if len(value) > max_bytes:
        return Parsed(value, "text", frozenset({OPAQUE_TEXT, TOO_LARGE}))
    flags: set[str] = set()
    try:
        parsed = _loads(value, flags)
    except RecursionError:
        return Parsed(value, "text", frozenset({OPAQUE_TEXT, TOO_DEEP}))
    except ValueError:
        return Parsed(value, "text", frozenset({OPAQUE_TEXT}))
    if isinstance(parsed, str) and parsed.lstrip()[:1] in ("{", "["):
        try:
            parsed = _loads(parsed, flags)
            flags.add(DOUBLE_ENCODED)
        except (ValueError, RecursionError):
            pass  # a string that merely starts with a brace stays a string
    return Parsed(parsed, "json", frozenset(flags))


def _loads(text: str, flags: set[str]) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):
            flags.add(DUPLICATE_KEYS)
        return obj

    def constant(name: str) -> float:
        flags.add(NON_FINITE)
        return float(name)

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def serialise(
    parsed: Parsed,
    *,
    drop_keys: frozenset[str] = frozenset(),
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Canonical:
    """Canonical text of a parsed value. `drop_keys` are removed at every depth."""
    if parsed.form == "text":
        return Canonical("text", parsed.value, parsed.flags)
    flags = set(parsed.flags)
    try:
        tree = _walk(parsed.value, 0, flags, drop_keys, max_depth)
        text = json.dumps(
            tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
        )
    except (_TooDeep, RecursionError):
        flags.add(TOO_DEEP)
        text = _dump_iteratively(parsed.value, flags, drop_keys)
    except ValueError:  # e.g. an integer beyond Python's int->str digit limit
        flags.update({NON_JSON_VALUE, TOO_LARGE})
        text = _dump_iteratively(parsed.value, flags, drop_keys)
    return Canonical("json", text, frozenset(flags))


def canonicalize(value: Any, **options: Any) -> Canonical:
    """Parse then serialise: the canonical form with no policy applied."""
    max_bytes = options.pop("max_bytes", DEFAULT_MAX_BYTES)
    return serialise(parse(value, max_bytes=max_bytes), **options)


def _walk(v: Any, depth: int, flags: set[str], drop: frozenset[str], max_depth: int) -> Any:
    t = type(v)
    if t is str or t is int or t is bool or v is None:
        return v
    if t is float:
        if not math.isfinite(v):
            flags.add(NON_FINITE)
        return v
    if depth >= max_depth:
        raise _TooDeep
    if isinstance(v, Mapping):
        out: dict[str, Any] = {}
        for k, x in v.items():
            if type(k) is not str:
                k = _tag_key(k, flags)
            if k in drop:
                continue
            out[k] = _walk(x, depth + 1, flags, drop, max_depth)
        return out
    if isinstance(v, (list, tuple)):
        return [_walk(x, depth + 1, flags, drop, max_depth) for x in v]
    return _walk_other(v, depth, flags, drop, max_depth)


def _walk_other(v: Any, depth: int, flags: set[str], drop: frozenset[str], max_depth: int) -> Any:
    # Subclasses of JSON types (str enums, IntEnum) serialise as their base value.
    for base in (bool, str, int, float):
        if isinstance(v, base):
            return _walk(base(v), depth, flags, drop, max_depth)
    flags.add(NON_JSON_VALUE)
    if isinstance(v, (set, frozenset)):
        items = [_walk(x, depth + 1, flags, drop, max_depth) for x in v]
        # Sets have no order of their own; sorting their canonical text is the only stable one.
        return {_TAG + "set": sorted(items, key=_sort_key)}
    if isinstance(v, (bytes, bytearray)):
        return _TAG + "bytes:" + bytes(v).hex()
    return f"{_TAG}{type(v).__qualname__}:{v!s}"


def _tag_key(k: Any, flags: set[str]) -> str:
    flags.add(NON_STRING_KEYS)
    return f"{_TAG}{type(k).__name__}:{k!r}"


def _sort_key(x: Any) -> str:
    return json.dumps(x, sort_keys=True, ensure_ascii=False, allow_nan=True)


def _dump_iteratively(value: Any, flags: set[str], drop: frozenset[str]) -> str:
    """Canonical text without recursion, for values too deep for the fast path.

    Same rules for objects and arrays; leaves that are not JSON become tagged
    strings. Used rarely, so clarity beats speed here.
    """
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item.text)
        elif isinstance(item, Mapping):
            stack.extend(_object_tokens(item, flags, drop))
        elif isinstance(item, (list, tuple)):
            stack.extend(_array_tokens(item))
        else:
            out.append(_leaf(item, flags))
    return "".join(out)


class _Raw:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _object_tokens(obj: Mapping[Any, Any], flags: set[str], drop: frozenset[str]) -> list[Any]:
    keyed = [(k if type(k) is str else _tag_key(k, flags), x) for k, x in obj.items()]
    keyed = sorted((kx for kx in keyed if kx[0] not in drop), key=lambda kx: kx[0])
    tokens: list[Any] = [_Raw("{")]
    for i, (k, x) in enumerate(keyed):
        tokens.append(_Raw(("," if i else "") + json.dumps(k, ensure_ascii=False) + ":"))
        tokens.append(x)
    tokens.append(_Raw("}"))
    return tokens[::-1]  # reversed: the stack pops from the end


def _array_tokens(items: Iterable[Any]) -> list[Any]:
    tokens: list[Any] = [_Raw("[")]
    for i, x in enumerate(items):
        if i:
            tokens.append(_Raw(","))
        tokens.append(x)
    tokens.append(_Raw("]"))
    return tokens[::-1]


def _leaf(v: Any, flags: set[str]) -> str:
    try:
        return json.dumps(_walk(v, 0, flags, frozenset(), 1), ensure_ascii=False, allow_nan=True)
    except (_TooDeep, ValueError):
        flags.add(NON_JSON_VALUE)
        # Beyond the int->str digit limit: hex has no such limit and stays exact.
        shown = hex(v) if isinstance(v, int) else f"{type(v).__qualname__}"
        return json.dumps(f"{_TAG}{shown}", ensure_ascii=False)
