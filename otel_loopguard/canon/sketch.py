"""A keyed similarity sketch of a call's arguments: near-duplicate actions (docs/equivalence.md).

One-permutation MinHash over the set of argument tokens: each token is hashed with a keyed
64-bit hash (the caller's, derived from the digest key), its low bits pick one of `SLOTS`
slots and the slot keeps the smallest rest. Two sketches agree in a slot about as often as
the two token sets overlap (Jaccard similarity), so `similarity` estimates it in O(SLOTS).

Fixed size whatever the arguments: SLOTS values of 16 bits, 64 hex characters on a span. A
result's sketch (`RESULT_SLOTS`, 128 hex characters) has twice the slots: results are compared
at a finer threshold than requests.
Without the key nobody can compute a token's slot or value, so a sketch tells how alike
two calls are, never what they said (docs/security.md).
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable, Iterable, Optional

SLOTS = 16
RESULT_SLOTS = 32
EMPTY = 0xFFFF  # a slot no token fell into (a real value is at most 0xFFFE)
MAX_TOKENS = 512  # distinct tokens hashed per call: enough to tell prompts apart, bounded cost
_TOKEN = re.compile(r"\w+")
_DIGIT = re.compile(r"\d")

Sketch = bytes  # SLOTS big-endian 16-bit values
_SLOTS = struct.Struct(f">{SLOTS}H")
_SIZES = {_SLOTS.size: _SLOTS, 2 * RESULT_SLOTS: struct.Struct(f">{RESULT_SLOTS}H")}


def tokens(value: Any, limit: int = MAX_TOKENS) -> set[str]:
    """Word tokens of every string and number in a parsed value; keys are left out (every
    call of a tool has the same keys). Words are lower-cased, id-like tokens (with a digit)
    kept as they are: "Python" is "python", but order "A12" is not order "a12"."""
    out: set[str] = set()
    stack = [value]
    while stack and len(out) < limit:
        v = stack.pop()
        if isinstance(v, str):
            out.update(t if _DIGIT.search(t) else t.lower() for t in _TOKEN.findall(v))
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.add(repr(v))
    if len(out) > limit:
        out = set(sorted(out)[:limit])
    return out


def sketch(words: Iterable[str], keyed: Callable[[str], int], size: int = SLOTS) -> Optional[Sketch]:
    """The sketch of a token set under `keyed` (a keyed 64-bit hash) in `size` slots (a power
    of two: SLOTS or RESULT_SLOTS); None without tokens."""
    mins = [1 << 64] * size
    bits = size.bit_length() - 1
    seen = False
    for word in words:
        h = keyed(word)
        slot = h & (size - 1)
        rest = h >> bits
        if rest < mins[slot]:
            mins[slot] = rest
        seen = True
    if not seen:
        return None
    top = 64 - bits  # bits in `rest`; a slot keeps its 16 highest
    return struct.pack(f">{size}H", *(EMPTY if m >> top else min(m >> (top - 16), EMPTY - 1) for m in mins))


def similarity(a: Optional[Sketch], b: Optional[Sketch]) -> float:
    """Estimated Jaccard similarity of the two token sets (0.0 when either is unknown)."""
    if a is None or b is None or len(a) != len(b) or len(a) not in _SIZES:
        return 0.0
    used = same = 0
    unpack = _SIZES[len(a)].unpack
    for x, y in zip(unpack(a), unpack(b)):
        if x == EMPTY and y == EMPTY:
            continue
        used += 1
        same += x == y
    return same / used if used else 0.0


def to_hex(s: Sketch) -> str:
    """The wire form: four hex characters a slot."""
    return s.hex()


def from_hex(text: Any, size: int = SLOTS) -> Optional[Sketch]:
    """A sketch of `size` slots read from a span, or None when `text` is not one."""
    if not isinstance(text, str) or len(text) != 4 * size:
        return None
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None


def slots(s: Sketch) -> tuple[int, ...]:
    """The slot values of a sketch."""
    return _SLOTS.unpack(s)
