"""Values shaped like generated ids or clock readings, masked in canonical result text.

Two results of one action that differ only in such values (a fresh message id, a fetch
time) are the same answer: that difference is not progress (docs/policy.md#progress).
The shapes are recognised from the values themselves, at any depth and under any key:

- UUIDs (any version), optionally after a short prefix (`msg_`, `req-`);
- ULIDs (26 Crockford base32 characters);
- hex ids of 24 or more digits, one case;
- base64 / base64url ids of 20 or more characters mixing digits, lower and upper case;
- ISO-8601 date-times (a date alone is not masked: a due date is business data);
- epoch timestamps in seconds (optionally with a fraction), milliseconds, microseconds
  or nanoseconds, as numbers or strings, from 2001-09-09 to 2033-05-18.

Only whole values are masked, never object keys or parts of longer text, so a log line
that carries a timestamp is still new text when its message is new. The masking runs on
canonical JSON text (keys sorted, compact, UTF-8), where a value's bounds are plain: a
string value is a quote preceded by `:`, `[` or `,` and followed by `,`, `]` or `}` (a
quote inside a string is escaped, and a closing quote is followed by structure, so no
string match starts or ends inside a string). An epoch number is a digit run between the
same marks; text such as `at,1764637323]` inside a string reads like one too, which can
only merge two answers that differ in nothing but such a number. Canonical text is already at hand on every
fingerprint path. Cost: two scans with literal-led patterns find the few candidates (a
quote followed by ten id-like characters, a ten-digit run starting with 1), and only those
are matched against the exact shapes; text and bytes give the same result (every
character the patterns read is ASCII). tests/fingerprint/test_volatile_values.py proves
the candidate scan equal to matching the exact shapes at every position.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, Optional

# Stands in for a masked value. A raw NUL never occurs in canonical JSON (it is escaped),
# so masked text can never equal the text of a result that had nothing masked.
MASK = '"\x00v"'

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_ULID = r"[0-7][0-9A-HJKMNP-TV-Z]{25}"
_HEX = r"[0-9a-f]{24,}|[0-9A-F]{24,}"
# Random base64 of 20+ characters all but surely mixes digits and both cases; a long word
# or a constant such as ALL_CAPS_SETTING does not. One that starts with `/` is read as a
# path (an acknowledgement echoing the file it wrote), not as an id.
_B64C = r"[A-Za-z0-9_+/-]"
_B64 = rf"(?!/)(?={_B64C}*[0-9])(?={_B64C}*[a-z])(?={_B64C}*[A-Z]){_B64C}{{20,}}={{0,2}}"
_PREFIX = r"(?:[A-Za-z]{1,12}[_-])?"
_ISO = (r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]{1,9})?)?"
        r"(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)?")
_EPOCH = r"1[0-9]{9}(?:\.[0-9]{1,9})?|1[0-9]{12}|1[0-9]{15}|1[0-9]{18}"
_END = r"(?=[,\]}])"  # a value ends where the structure goes on

# The exact shapes, matched at a candidate's position: a whole string value, or a number.
_STRING = rf'"(?:{_PREFIX}(?:{_UUID}|{_ULID}|{_HEX}|{_B64})|{_ISO}|{_EPOCH})"{_END}'
_NUMBER = rf"(?:{_EPOCH}){_END}"
# Candidates: every shape above starts with ten of these characters after its quote (the
# shortest, an ISO time without seconds, has a date first), or with a ten-digit run.
_STRING_START = r'"[0-9A-Za-z_+/=:.-]{10}'
_NUMBER_START = r"1[0-9]{9}"
_BEFORE = ":[,"  # what precedes a value (a key is preceded by `{` or `,` and followed by `:`)


class _Shapes:
    """The patterns for one of str or bytes."""

    def __init__(self, encode: Callable[[str], Any]):
        self.string_start = re.compile(encode(_STRING_START))
        self.number_start = re.compile(encode(_NUMBER_START))
        self.string = re.compile(encode(_STRING))
        self.number = re.compile(encode(_NUMBER))
        self.before = frozenset(encode(_BEFORE)) if encode is _ascii else frozenset(_BEFORE)
        self.mask = encode(MASK)


def _ascii(text: str) -> bytes:
    return text.encode("utf-8")


def _same(text: str) -> str:
    return text


_TEXT = _Shapes(_same)
_BYTES = _Shapes(_ascii)


def _volatile_spans(data: Any, shapes: _Shapes) -> list[tuple[int, int]]:
    """(start, end) of every volatile-shaped value in canonical JSON `data`, in order."""
    spans = []
    before = shapes.before
    for start_at, exact in ((shapes.string_start, shapes.string), (shapes.number_start, shapes.number)):
        for candidate in start_at.finditer(data):
            start = candidate.start()
            if start and data[start - 1] in before:
                found = exact.match(data, start)
                if found is not None:
                    spans.append((start, found.end()))
    if len(spans) > 1:
        spans.sort()
    return spans


def _masked(data: Any, shapes: _Shapes, keep: tuple[Any, ...]) -> Any:
    if shapes.string_start.search(data) is None and shapes.number_start.search(data) is None:
        return None  # no candidate at all: most results, at the cost of two C-level scans
    spans = _volatile_spans(data, shapes)
    if not spans:
        return None  # most results
    pieces: list[Any] = []
    last = 0
    for start, end in spans:
        if start < last or (keep and data.endswith(keep, 0, start)):
            continue  # inside a masked value already, or under a meaningful key
        pieces += (data[last:start], shapes.mask)
        last = end
    if last == 0:
        return None
    pieces.append(data[last:])
    return data[:0].join(pieces)


class Masker:
    """Masks volatile-shaped values in canonical JSON text, except under `keep` keys (a
    created record's id is progress for a create tool)."""

    __slots__ = ("_keep_text", "_keep_bytes")

    def __init__(self, keep: Iterable[str] = ()):
        # A kept value sits right after `"key":` (its key, escaped as canonical text writes it).
        suffixes = tuple(json.dumps(k, ensure_ascii=False) + ":" for k in sorted(set(keep)))
        self._keep_text = suffixes
        self._keep_bytes = tuple(s.encode("utf-8") for s in suffixes)

    def text(self, text: str) -> Optional[str]:
        """The masked text, or None when nothing in it is volatile-shaped (most results)."""
        return _masked(text, _TEXT, self._keep_text)

    def data(self, data: bytes) -> Optional[bytes]:
        """`text` for canonical JSON already encoded as UTF-8 (the native paths)."""
        return _masked(data, _BYTES, self._keep_bytes)


def plain_mask(text: str) -> str:
    """The reference the candidate scan must equal: the exact shapes tried at every position
    (slow; for tests)."""
    both = re.compile(rf"(?<=[:\[,])(?:{_STRING}|{_NUMBER})")
    return both.sub(MASK, text)
