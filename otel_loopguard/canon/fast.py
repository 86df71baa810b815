"""Shortcuts to the canonical form, the fingerprint stage's one speed module: canonical.py
holds the rules, and everything here gives exactly what its `parse` then `serialise` give, or
declines (None) so that they answer. tests/fingerprint/test_fast_paths.py holds each shortcut
to the rules on property-generated and odd inputs; the Rust module (native.py), tried first
by the fingerprinter, is held to them by tests/native/.

- `parse_and_serialise`: both steps at once, for the fingerprinter's general path: through
  orjson when it reads and writes as the standard library does, else the rules, skipping the
  walk for text the rules parsed themselves (it then holds JSON types only);
- `orjson_canonical`: canonical UTF-8 of JSON text straight from orjson, for digests;
- `orjson_flat`: the same for an already-parsed flat object (an unwrapped result, say).

Only public APIs: orjson's `loads`/`dumps`, the rules' own functions. Without orjson (a
platform without its wheels) every shortcut declines but the walk-free one.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Callable, Optional

from .canonical import MAX_TEXT_DEPTH, NO_FLAGS, Parsed, json_text, parse, serialise

try:  # a C JSON library, several times faster on small objects: see _orjson
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


def parse_and_serialise(
    value: Any, drop_keys: frozenset[str], max_bytes: int, max_depth: int
) -> tuple[Any, str, str, frozenset[str]]:
    """(parsed value, form, text, flags): `parse` then `serialise`, in one step.

    The common input (a JSON object or array as text, small, shallow, no flag, no key
    to drop) is settled by orjson without the intermediate records; other text the rules
    parse, and what they parsed is written without the walk when nothing in it needs one.
    """
    brackets = _shortcut_brackets(value, max_bytes, max_depth)
    if brackets >= 0:
        fast = _settled(value, brackets, drop_keys)
        if fast is not None:
            return fast[0], "json", fast[1].decode("utf-8"), NO_FLAGS
    parsed = parse(value, max_bytes=max_bytes)
    if _plain(parsed, drop_keys, max_depth):
        text = _unwalked(parsed.value)
        if text is not None:
            return parsed.value, "json", text, parsed.flags
    canon = serialise(parsed, drop_keys=drop_keys, max_depth=max_depth)
    return parsed.value, canon.form, canon.text, canon.flags


def orjson_canonical(
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
    """`_orjson`'s answer, unless a key to drop may be in the text (the general path drops it)."""
    fast = _orjson(text)
    if fast is not None and (not drop_keys or _drops_nothing(fast[0], text, brackets, drop_keys)):
        return fast
    return None


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
    """No key to drop in `value`, parsed by `_orjson` from `text` (no \\u escapes in it)."""
    if brackets == 1 and type(value) is dict:  # one object, nothing nested: its keys say it all
        return value.keys().isdisjoint(drop_keys)
    return not _may_drop(text, drop_keys)


def _orjson(text: str) -> Optional[tuple[Any, bytes]]:
    """(value, canonical UTF-8 text) through orjson, or None when its answer could differ
    from the standard library's, which defines the canonical form. The caller keeps the
    limits (`orjson_canonical`: size, and nesting, which orjson accepts far deeper).

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
    """No float in orjson's output that the stdlib would write otherwise (see `_orjson`)."""
    if _SIGNED_EXPONENTS:  # floats written as the stdlib writes them are kept
        return not ((out.find(b"e+") >= 0 or out.find(b"e-") >= 0 or out.find(b"0.0000") >= 0)
                    and _FLOAT_DIFFERS.search(out))
    return not _FLOAT_OUT.search(out)


# What a flat object may hold for orjson_flat: JSON scalars by exact type (a subclass, an
# enum say, takes the general path, which writes its base value).
_FLAT_SCALARS = frozenset({str, int, bool, float, type(None)})
MAX_FLAT_KEYS = 64


def orjson_flat(value: Any, drop_keys: frozenset[str]) -> Optional[bytes]:
    """Canonical UTF-8 text of an already-parsed flat object (string keys, scalar values:
    what framework wrappers and most tool arguments are once unwrapped) through orjson, or
    None for anything else. Equal to `serialise(parse(value))` whenever it answers: no
    key to drop, no flag (every float finite), and the same checks on orjson's writing as
    `_orjson` (floats it writes otherwise, integers beyond 64 bits and lone surrogates,
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


def _unwalked(value: Any) -> Optional[str]:
    """The canonical text of a value the rules parsed from text, without the walk: it holds
    only JSON types with string keys, its NaN tokens already flagged. None when the walk
    must run: a number that overflowed to infinity (1e999) is flagged there, and a caller
    short of stack is left to the rules' iterative writer."""
    try:
        text = json_text(value)
    except (RecursionError, ValueError):
        return None
    return None if "Infinity" in text or "NaN" in text else text
