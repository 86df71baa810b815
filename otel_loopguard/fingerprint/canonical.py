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
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional

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
            return Parsed(value, "json", NO_FLAGS)
    # The cheap half of each limit check inline; the helpers settle the rare rest.
    if len(value) * 4 > max_bytes and _utf8_length_over(value, max_bytes):
        return Parsed(value, "text", frozenset({OPAQUE_TEXT, TOO_LARGE}))
    if value.count("[") + value.count("{") > MAX_TEXT_DEPTH and _nesting_over(value, MAX_TEXT_DEPTH):
        return Parsed(value, "text", frozenset({OPAQUE_TEXT, TOO_DEEP}))
    if value.lstrip(_JSON_SPACE)[:1] not in _JSON_STARTS:
        return Parsed(value, "text", PROSE)  # prose, not JSON: settled without a failed decode
    flags: set[str] = set()
    try:
        parsed = _loads(value, flags)
    except (ValueError, RecursionError):
        return Parsed(value, "text", _OPAQUE)
    if isinstance(parsed, str) and parsed.lstrip()[:1] in ("{", "[") and not _nesting_over(parsed, MAX_TEXT_DEPTH):
        inner: set[str] = set()
        try:
            parsed = _loads(parsed, inner)
            flags |= inner | {DOUBLE_ENCODED}
        except (ValueError, RecursionError):
            pass  # a string that merely starts with a brace stays a string
    return Parsed(parsed, "json", frozenset(flags) if flags else NO_FLAGS, value)


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


# One decoder and one encoder for the process: building them per call costs more than
# the parse. The hooks report into the calling thread's flag set.
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
_SCAN = _DECODER.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__, not in its stub
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def _c_encoder() -> Optional[Callable[[Any], str]]:
    """The C encoder `_ENCODER.encode` builds on every call, built once.

    `encode` re-creates it per call (twice the cost of encoding a small object).
    No circular-reference markers: the values encoded here are either parsed from
    text or rebuilt by `_walk`, so they cannot be cyclic, and a shared markers dict
    would be left dirty by an encode that raises. Output is the same C code's.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encode = make(None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", True, False, True)
        if "".join(encode({"b": [1.5, None], "a": "\u00e9"}, 0)) != _ENCODER.encode({"b": [1.5, None], "a": "\u00e9"}):
            return None
    except Exception:  # another Python's C encoder signature: keep the public path
        return None
    return lambda value: "".join(encode(value, 0))


_encode: Callable[[Any], str] = _c_encoder() or _ENCODER.encode

try:  # a C JSON library, several times faster on small objects: see _native
    import orjson

    _orjson_loads: Optional[Callable[[str], Any]] = orjson.loads
    _orjson_dumps = orjson.dumps
    _ORJSON_SORT = orjson.OPT_SORT_KEYS
except ImportError:  # a platform without its wheels: the standard library alone
    _orjson_loads = None
# A float in orjson's compact output: a number token (it follows ":", "," or "[") with a
# "." or an exponent. Text inside strings rarely looks like that ("site5.example.com",
# "9e107d9d" and "v1.2" do not), and where it does the stdlib path merely takes over.
_FLOAT_OUT = re.compile(rb"[:,\[]-?[0-9]+[.eE]")
# ...and one orjson writes otherwise than the stdlib: in exponent form (1e-07 is "1e-7"; an
# integer beyond 64 bits became a float such as 1.8446744073709552e+19) or below 1e-4 in
# fixed form (1e-05 is "0.00001"). From 1e-4 up to 1e16 both write the same shortest digits.
_FLOAT_DIFFERS = re.compile(rb"[:,\[]-?[0-9]+(?:\.[0-9]+)?e[-+]|[:,\[]-?0\.0000")


def _signed_exponents() -> bool:
    """Whether this orjson writes every float with a "." or a signed exponent, as 3.11.7
    and later do ("1e+16"; 3.10 wrote "1e16"): then only output holding one of those
    needs the float search. Checked on the forms it could get wrong."""
    if _orjson_loads is None:
        return False
    samples = (1e16, 1e22, 1e300, 2.0**64, 1e-7, 5e-324, 1.5, -0.0, 123456789.0)
    return all(b"." in o or b"e+" in o or b"e-" in o for o in (_orjson_dumps(f) for f in samples))


_SIGNED_EXPONENTS = _signed_exponents()


def _loads(text: str, flags: set[str]) -> Any:
    _parsing.flags = flags
    # The scanner alone (what `decode` calls) when the text has no surrounding
    # whitespace; anything else goes through `decode`, which also raises its errors.
    try:
        value, end = _SCAN(text, 0)
        if end == len(text):
            return value
    except StopIteration:
        pass
    return _DECODER.decode(text)


def serialise(
    parsed: Parsed,
    *,
    drop_keys: frozenset[str] = frozenset(),
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Canonical:
    """Canonical text of a parsed value. `drop_keys` are removed at every depth."""
    if parsed.form == "text":
        return Canonical("text", parsed.value, parsed.flags)
    if _plain(parsed, drop_keys, max_depth):
        try:  # parsed here: plain JSON, shallow, nothing to drop, so no walk is needed
            text = _encode(parsed.value)
            # ...unless a number overflowed to infinity (1e999): the walk flags it.
            if "Infinity" not in text and "NaN" not in text:
                return Canonical("json", text, parsed.flags)
        except RecursionError:
            pass  # the iterative writer below takes it
    flags = set(parsed.flags)
    try:
        tree = _walk(parsed.value, 0, flags, drop_keys, max_depth)
        text = _encode(tree)
    except (_TooDeep, RecursionError):
        flags.add(TOO_DEEP)
        text = _dump_iteratively(parsed.value, flags, drop_keys)
    except ValueError:  # e.g. an integer beyond Python's int->str digit limit
        flags.update({NON_JSON_VALUE, TOO_LARGE})
        text = _dump_iteratively(parsed.value, flags, drop_keys)
    return Canonical("json", text, frozenset(flags) if flags else NO_FLAGS)


def parse_and_serialise(
    value: Any, drop_keys: frozenset[str], max_bytes: int, max_depth: int
) -> tuple[Any, str, str, frozenset[str]]:
    """(parsed value, form, text, flags): `parse` then `serialise`, in one step.

    The common input (a JSON object or array as text, small, shallow, no flag, no key
    to drop) is settled here without the intermediate records and with each check made
    once; everything else takes the two general functions, which this must equal
    (tests/fingerprint/test_fast_paths.py).
    """
    brackets = _shortcut_brackets(value, max_bytes, max_depth)
    if brackets >= 0:
        fast = _settled(value, brackets, drop_keys)
        if fast is not None:
            return fast[0], "json", fast[1].decode("utf-8"), NO_FLAGS
        if not drop_keys or not _may_drop(value, drop_keys):
            scanned = _scanned(value)
            if scanned is not None:
                return scanned[0], "json", scanned[1], NO_FLAGS
    parsed_ = parse(value, max_bytes=max_bytes)
    canon = serialise(parsed_, drop_keys=drop_keys, max_depth=max_depth)
    return parsed_.value, canon.form, canon.text, canon.flags


def native_canonical(
    value: Any, drop_keys: frozenset[str], max_bytes: int, max_depth: int
) -> Optional[tuple[Any, bytes]]:
    """(parsed value, canonical text as UTF-8) of JSON text that orjson settles exactly as
    `parse` then `serialise` would (no flag, nothing to drop); None for anything else.
    The bytes go straight into a digest, with no decode and re-encode in between."""
    brackets = _shortcut_brackets(value, max_bytes, max_depth)
    return _settled(value, brackets, drop_keys) if brackets >= 0 else None


def _shortcut_brackets(value: Any, max_bytes: int, max_depth: int) -> int:
    """How many brackets the JSON text `value` holds, when it may take a shortcut (text
    opening an object or array, under both limits whatever its UTF-8: fewer brackets than
    the depth limit cannot nest deeper); -1 when only the general path will do."""
    if type(value) is str and len(value) * 4 <= max_bytes:
        brackets = value.count("{") + value.count("[")
        if brackets <= max_depth and brackets <= MAX_TEXT_DEPTH and value[:1] in ("{", "["):
            return brackets
    return -1


def _settled(text: str, brackets: int, drop_keys: frozenset[str]) -> Optional[tuple[Any, bytes]]:
    """`_native`'s answer, unless a key to drop may be in the text (the general path drops it)."""
    fast = _native(text)
    if fast is not None and (not drop_keys or _drops_nothing(fast[0], text, brackets, drop_keys)):
        return fast
    return None


def _scanned(text: str) -> Optional[tuple[Any, str]]:
    """(value, canonical text) through the stdlib's C scanner and encoder, called directly;
    None when the text needs `parse` (whitespace, opaque text) or a flag (NaN, 1e999)."""
    flags: set[str] = set()
    _parsing.flags = flags
    try:
        parsed, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(text) or flags:
        return None
    try:
        out = _encode(parsed)
    except RecursionError:  # a caller already deep in its stack: serialise() copes
        return None
    if "Infinity" in out or "NaN" in out:  # an overflow (1e999) to flag
        return None
    return parsed, out


def _may_drop(text: str, drop_keys: frozenset[str]) -> bool:
    """Could a key to drop occur in this JSON text? A key may be spelt with escapes:
    any key as \\u escapes, a key holding "/", a quote or a backslash with short ones."""
    if "\\" in text and ("\\u" in text or _escapable(drop_keys)):
        return True
    for key in drop_keys:  # a plain loop: half the cost of any() over a generator
        if key in text:
            return True
    return False


@lru_cache(maxsize=64)  # a policy has a handful of drop sets
def _escapable(drop_keys: frozenset[str]) -> bool:
    """Whether some key can be written with a short JSON escape (\\/, \\", \\\\, \\n...)."""
    return any(c in key for key in drop_keys for c in '/"\\') or any(ord(c) < 0x20 for key in drop_keys for c in key)


def _drops_nothing(value: Any, text: str, brackets: int, drop_keys: frozenset[str]) -> bool:
    """No key to drop in `value`, parsed by `_native` from `text` (no \\u escapes in it)."""
    if brackets == 1 and type(value) is dict:  # one object, nothing nested: its keys say it all
        return value.keys().isdisjoint(drop_keys)
    return not _may_drop(text, drop_keys)


def _native(text: str) -> Optional[tuple[Any, bytes]]:
    """(value, canonical UTF-8 text) through orjson, or None when its answer could differ
    from the standard library's, which defines the canonical form. The caller keeps the
    limits (`native_canonical`: size, and nesting, which orjson accepts far deeper).

    orjson refuses what would need a flag (NaN, 1e999, lone surrogates) and writes
    strings, ints and key order as the stdlib does. It differs on floats (it writes 1e-05
    as 0.00001, and reads integers beyond 64 bits as floats) and it keeps duplicate keys
    silently, so those inputs go back to the stdlib path:
    - floats: from 1e-4 up to 1e16 orjson writes the stdlib's text; other floats are
      number tokens in exponent form or starting 0.0000 (`_FLOAT_DIFFERS`, searched only
      where the output holds "e+", "e-" or "0.0000"). An orjson that writes unsigned
      exponents (before 3.11.7, see `_SIGNED_EXPONENTS`) is trusted with no float at all
      (`_FLOAT_OUT`);
    - duplicate keys: every key in the text ends before a ":", and a ":" inside a string
      is copied to the output unchanged, so without escapes (a \\u003a would be a ":"
      in the output only) the text and the output hold equally many ":" exactly when
      no key was dropped.
    """
    if _orjson_loads is None or text[-1:] not in ("}", "]") or "\\u" in text:
        return None  # trailing whitespace, too, is left to the stdlib path
    try:
        value = _orjson_loads(text)
        out = _orjson_dumps(value, option=_ORJSON_SORT)
    except (ValueError, TypeError, RecursionError):  # orjson's errors subclass ValueError / TypeError
        return None
    if text.count(":") != out.count(b":"):
        return None
    return (value, out) if _floats_written_alike(out) else None


def _floats_written_alike(out: bytes) -> bool:
    """No float in orjson's output that the stdlib would write otherwise (see `_native`)."""
    if _SIGNED_EXPONENTS:  # floats written as the stdlib writes them are kept
        return not ((out.find(b"e+") >= 0 or out.find(b"e-") >= 0 or out.find(b"0.0000") >= 0)
                    and _FLOAT_DIFFERS.search(out))
    return not _FLOAT_OUT.search(out)


# What a flat object may hold for native_flat: JSON scalars by exact type (a subclass, an
# enum say, takes the general path, which writes its base value).
_FLAT_SCALARS = frozenset({str, int, bool, float, type(None)})
MAX_FLAT_KEYS = 64


def native_flat(value: Any, drop_keys: frozenset[str]) -> Optional[bytes]:
    """Canonical UTF-8 text of an already-parsed flat object (string keys, scalar values:
    what framework wrappers and most tool arguments are once unwrapped) through orjson, or
    None for anything else. Equal to `serialise(parse(value))` whenever it answers: no
    key to drop, no flag (every float finite), and the same checks on orjson's writing as
    `_native` (floats it writes otherwise, integers beyond 64 bits and lone surrogates,
    which it refuses)."""
    if _orjson_loads is None or type(value) is not dict or len(value) > MAX_FLAT_KEYS:
        return None
    for k, v in value.items():
        t = type(v)
        if type(k) is not str or t not in _FLAT_SCALARS or (t is float and not math.isfinite(v)):
            return None
    if drop_keys and not value.keys().isdisjoint(drop_keys):
        return None
    try:
        out = _orjson_dumps(value, option=_ORJSON_SORT)
    except (TypeError, ValueError):
        return None
    return out if _floats_written_alike(out) else None


def _plain(parsed: Parsed, drop_keys: frozenset[str], max_depth: int) -> bool:
    source = parsed.source
    if source is None:
        return False
    if drop_keys and _may_drop(source, drop_keys):
        return False
    # Fewer brackets than max_depth cannot nest deeper than it (two C-level counts).
    return source.count("{") + source.count("[") <= max_depth


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
