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
import re
import threading
from typing import Any, Iterable, Mapping, NamedTuple, Optional

# Flags a canonical form can carry. They are part of the public docs.
OPAQUE_TEXT = "opaque_text"  # not JSON: the exact text is hashed
DOUBLE_ENCODED = "double_encoded"  # a JSON string holding JSON, parsed twice
DUPLICATE_KEYS = "duplicate_keys"  # JSON object repeated a key: last one wins
NON_FINITE = "non_finite_number"  # NaN/Infinity: written as bare tokens
NON_STRING_KEYS = "non_string_keys"  # Python keys that are not str: tagged
NON_JSON_VALUE = "non_json_value"  # bytes, sets, objects: tagged
TOO_DEEP = "too_deep"  # nesting over the limit: serialised without parsing rules
TOO_LARGE = "too_large"  # text over the size limit: hashed as opaque text

NO_FLAGS: frozenset[str] = frozenset()  # shared: most values carry no flag

DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_BYTES = 256 * 1024
# JSON text nested deeper than this is kept as opaque text. Fixed, so the verdict
# never depends on how deep the caller's stack already is (json.loads recurses).
MAX_TEXT_DEPTH = 200

# A tag prefix that no ordinary JSON string starts with; tagged values are
# always accompanied by a flag, so even a crafted collision is never silent.
_TAG = "\u0000"


class Parsed(NamedTuple):
    """A value after parsing: `form` is "json" or "text" (opaque).

    `source` is the JSON text it was parsed from, when this module parsed it: the
    value then holds only JSON types with string keys and its non-finite numbers
    are already flagged, so serialising it needs no walk.
    """

    value: Any
    form: str
    flags: frozenset[str]
    source: Optional[str] = None


class Canonical(NamedTuple):
    form: str
    text: str
    flags: frozenset[str]


# How JSON text can begin (after JSON whitespace): what the stdlib decoder accepts, the
# NaN and Infinity it reads (and flags) included. Any other text is no JSON at all.
_JSON_SPACE = " \t\n\r"
_JSON_STARTS = frozenset('{["-0123456789tfnNI')
_OPAQUE = frozenset({OPAQUE_TEXT})
# The same flag for text settled by its first character: that verdict depends on nothing
# but the text (a failed decode may be the caller's stack running short), so a memo may
# keep it. Equal to _OPAQUE; told apart by identity (fingerprinter._kept).
PROSE = frozenset({OPAQUE_TEXT})


class _TooDeep(Exception):
    pass


def parse(value: Any, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Parsed:
    """Parse JSON text; keep anything else as it is. Never raises."""
    if type(value) is not str:  # text is the usual input: one exact-type test settles it
        if isinstance(value, (bytes, bytearray, memoryview)):
            value = bytes(value).decode("utf-8", errors="surrogateescape")
        elif not isinstance(value, str):
            return Parsed(value=value, form="json", flags=NO_FLAGS)
    # The cheap half of each limit check inline; the helpers settle the rare rest.
    if len(value) * 4 > max_bytes and _utf8_length_over(value, max_bytes):
        return Parsed(value=value, form="text", flags=frozenset({OPAQUE_TEXT, TOO_LARGE}))
    if value.count("[") + value.count("{") > MAX_TEXT_DEPTH and _nesting_over(value, MAX_TEXT_DEPTH):
        return Parsed(value=value, form="text", flags=frozenset({OPAQUE_TEXT, TOO_DEEP}))
    if value.lstrip(_JSON_SPACE)[:1] not in _JSON_STARTS:
        return Parsed(value=value, form="text", flags=PROSE)  # prose, not JSON: settled without a failed decode
    flags: set[str] = set()
    try:
        parsed = _loads(value, flags)
    except (ValueError, RecursionError):
        return Parsed(value=value, form="text", flags=_OPAQUE)
    if isinstance(parsed, str) and parsed.lstrip()[:1] in ("{", "[") and not _nesting_over(parsed, MAX_TEXT_DEPTH):
        inner: set[str] = set()
        try:
            parsed = _loads(parsed, inner)
            flags |= inner | {DOUBLE_ENCODED}
        except (ValueError, RecursionError):
            pass  # a string that merely starts with a brace stays a string
    return Parsed(value=parsed, form="json", flags=frozenset(flags) if flags else NO_FLAGS, source=value)


def _utf8_length_over(text: str, limit: int) -> bool:
    if len(text) > limit:
        return True
    if len(text) * 4 <= limit:  # no UTF-8 character is longer than 4 bytes
        return False
    return len(text.encode("utf-8", errors="surrogatepass")) > limit


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _nesting_over(text: str, limit: int) -> bool:
    """True when JSON text nests deeper than `limit`, whatever the caller's stack.

    Fewer brackets than the limit cannot nest deeper, which settles almost every
    input with two C-level counts; only bracket-heavy text gets the exact scan.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


# One decoder and one encoder for the process, through their public methods (fast.py holds
# the shortcuts). The decoder's hooks report into the calling thread's flag set.
_parsing = threading.local()


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(items)
    if len(obj) != len(items):
        _parsing.flags.add(DUPLICATE_KEYS)
    return obj


def _constant(name: str) -> float:
    _parsing.flags.add(NON_FINITE)
    return float(name)


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def json_text(value: Any) -> str:
    """The canonical writer: keys sorted, compact separators, no ASCII escaping, NaN and
    Infinity as bare tokens. Only for values holding JSON types with string keys (what
    `parse` gives, or `_walk`'s output); `serialise` is the rule for anything else."""
    return _ENCODER.encode(value)


def _loads(text: str, flags: set[str]) -> Any:
    _parsing.flags = flags
    return _DECODER.decode(text)


def serialise(
    parsed: Parsed,
    *,
    drop_keys: frozenset[str] = frozenset(),
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Canonical:
    """Canonical text of a parsed value. `drop_keys` are removed at every depth."""
    if parsed.form == "text":
        return Canonical(form="text", text=parsed.value, flags=parsed.flags)
    flags = set(parsed.flags)
    try:
        text = json_text(_walk(parsed.value, 0, flags, drop_keys, max_depth))
    except (_TooDeep, RecursionError):
        flags.add(TOO_DEEP)
        text = _dump_iteratively(parsed.value, flags, drop_keys)
    except ValueError:  # e.g. an integer beyond Python's int->str digit limit
        flags.update({NON_JSON_VALUE, TOO_LARGE})
        text = _dump_iteratively(parsed.value, flags, drop_keys)
    return Canonical(form="json", text=text, flags=frozenset(flags) if flags else NO_FLAGS)


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
    if t is dict or isinstance(v, Mapping):  # the exact-type test skips a slow ABC check
        out: dict[str, Any] = {}
        for k, x in v.items():
            if type(k) is not str:
                k = _tag_key(k, flags)
            if k in drop:
                continue
            out[k] = _walk(x, depth + 1, flags, drop, max_depth)
        return out
    if t is list or isinstance(v, (list, tuple)):
        return [_walk(x, depth + 1, flags, drop, max_depth) for x in v]
    return _walk_other(v, depth, flags, drop, max_depth)


def _walk_other(v: Any, depth: int, flags: set[str], drop: frozenset[str], max_depth: int) -> Any:
    # Subclasses of JSON types (str enums, IntEnum) serialise as their base value;
    # the base type's own conversion skips Enum.__str__ ("Color.RED").
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, str):
        return _walk(str.__str__(v), depth, flags, drop, max_depth)
    if isinstance(v, int):
        return _walk(int.__index__(v), depth, flags, drop, max_depth)
    if isinstance(v, float):
        return _walk(float.__float__(v), depth, flags, drop, max_depth)
    flags.add(NON_JSON_VALUE)
    if isinstance(v, (set, frozenset)):
        items = [_walk(x, depth + 1, flags, drop, max_depth) for x in v]
        # Sets have no order of their own; sorting their canonical text is the only stable one.
        return {_TAG + "set": sorted(items, key=_sort_key)}
    if isinstance(v, (bytes, bytearray)):
        return _TAG + "bytes:" + bytes(v).hex()
    return f"{_TAG}{type(v).__qualname__}:{_shown(v, str)}"


def _shown(v: Any, show: Any) -> str:
    """str()/repr() that never raises: huge ints in hex, a failing __str__ by type."""
    try:
        return show(v)
    except ValueError:
        if isinstance(v, int):
            return hex(v)
        return "<unprintable>"
    except Exception:  # an object's own __str__/__repr__ may raise anything
        return "<unprintable>"


def _tag_key(k: Any, flags: set[str]) -> str:
    flags.add(NON_STRING_KEYS)
    return f"{_TAG}{type(k).__name__}:{_shown(k, repr)}"


def _sort_key(x: Any) -> str:
    return json.dumps(x, sort_keys=True, ensure_ascii=False, allow_nan=True)


def _dump_iteratively(value: Any, flags: set[str], drop: frozenset[str]) -> str:
    """Canonical text without recursion, for values too deep for the fast path.

    Same rules for objects and arrays; leaves that are not JSON become tagged
    strings. Used rarely, so clarity beats speed here.
    """
    out: list[str] = []
    stack: list[Any] = [value]
    open_containers: set[int] = set()  # ids on the current path: a repeat is a cycle
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item.text)
        elif isinstance(item, _Close):
            open_containers.discard(item.ident)
        elif isinstance(item, (Mapping, list, tuple)):
            if id(item) in open_containers:
                flags.add(NON_JSON_VALUE)
                out.append(json.dumps(_TAG + "cycle"))
                continue
            open_containers.add(id(item))
            stack.append(_Close(id(item)))
            stack.extend(_object_tokens(item, flags, drop) if isinstance(item, Mapping) else _array_tokens(item))
        else:
            out.append(_leaf(item, flags))
    return "".join(out)


class _Raw:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Close:
    __slots__ = ("ident",)

    def __init__(self, ident: int) -> None:
        self.ident = ident


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
