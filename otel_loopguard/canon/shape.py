"""Volatile fragments masked INSIDE text: the shape form of a result (docs/equivalence.md).

volatile.py masks whole values shaped like ids or clock readings. A log line or a test
report carries its noise inside longer text: "12:04:31.552 attempt 3 failed after 1.2s
(pid 4711, /tmp/tmpa8f3k2)". Two answers that differ only there are the same answer.

Two strengths, both pure regular expressions over text (no native path, so every shell
gets the same result):

- `noise`: clock readings (date-times, times of day, epoch numbers, a number under a key
  that names one: `uptime_ms: 4288`), durations, process ids, attempt and repetition
  counters (`attempt 3`, `read 3×`), temp paths, hex addresses. Used for a result's *items*: an item
  keeps the ids it names (a page of new record ids is new).
- `shape`: `noise`, then ids (UUIDs, long hex ids mixing digits and letters): the result's
  *shape digest*, compared only with earlier answers of the same action.

A date alone is never masked (a due date is business data), nor a bare count ("3 failed"
and "2 failed" differ), and masking applies to results only: an action's identity (its
arguments) is never shape-masked. No pattern crosses a line break, so masking a text and
masking each of its lines agree (items are lines).

Cost: every digit-led fragment is one pattern that starts with a digit class, which the
regular expression engine skips to in C, with no Python callback per match; the word-led
ones (pid, attempt, temp paths, hex addresses) run only when a cheap substring test finds
their keyword. A pass costs in proportion to the text's length (figures in
docs/performance.md, "Equivalence").
"""

from __future__ import annotations

import re
from typing import Callable, Optional

# Stands in for a masked fragment. A raw NUL never occurs in canonical JSON (it is escaped),
# so masked text never equals the text of a result with nothing masked.
FRAGMENT = "\x00"

# Units as a small trie: a failing first letter fails at once.
_UNITS = r"(?:[nuµm]s|s(?:ecs?|econds?)?|min(?:s|utes?)?|h(?:rs?|ours?)?)"
# Each alternative is what follows the first digit of: a date-time, a time of day, an epoch
# number (seconds to nanoseconds, 2001-2033, first digit 1), a duration. The lookbehind after
# the first digit says a fragment starts a token ("v2.5s", "abc123ms" are kept) without
# costing the engine its skip to the next digit. Possessive quantifiers: a digit run that is
# no duration fails once, without backtracking.
_DIGIT_LED = re.compile(
    r"[0-9](?<![0-9A-Za-z_.][0-9])(?:"
    r"[0-9]{3}-[0-9]{2}-[0-9]{2}[T ][0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?(?:[.,][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2}|[ ]?UTC)?"
    r"|[0-9]?:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?(?![0-9:])"
    r"|(?<=1)[0-9]{9}(?:[0-9]{3}){0,3}(?:\.[0-9]{1,9})?(?![0-9A-Za-z_])"
    rf"|[0-9]*+(?:\.[0-9]++)?+[ ]?+{_UNITS}(?![A-Za-z0-9])"
    r")"
)
# Word-led fragments, each run only when its keyword is in the text (a substring test).
_WORD_LED = (
    (("pid",), re.compile(r"(?i)(?<![A-Za-z])pid(?![A-Za-z])[ \t]*[:=#]?[ \t]*[0-9]+")),
    (("attempt", "retr", "try", "tries", "iteration", "round"),
     re.compile(r"(?i)(?<![A-Za-z])(?:attempt|retry|retries|try|tries|iteration|round)(?![A-Za-z])"
                r"[ \t]*(?:#|no\.?|number)?[ \t]*[0-9]+(?:[ \t]*(?:/|of)[ \t]*[0-9]+)?")),
    (("/tmp/", "/var/", "/dev/shm/"),
     re.compile(r"(?:/tmp|/var/tmp|/private/var/folders|/var/folders|/dev/shm)/[^\s\"'\\,;:)\]}]*")),
    (("temp\\",), re.compile(r"(?i)(?<![A-Za-z])[A-Z]:\\{1,2}(?:[^\s\"\\]+\\{1,2})*?Temp\\{1,2}[^\s\"'\\,;]*")),
    (("0x",), re.compile(r"(?<![0-9A-Za-z_])0x[0-9a-fA-F]{4,}(?![0-9A-Za-z_])")),
    # A repetition count, `read 3×`: how often the agent did it, not what it got (not a
    # dimension: `1920×1080` is kept).
    (("\u00d7",), re.compile(r"(?<![0-9A-Za-z_.])[0-9]+[ \t]?\u00d7(?![ \t]?[0-9])")),
)
# A number written under a key that names a clock reading, inside text or canonical JSON
# (`"uptime_ms":428829`, `elapsed=1.2`, `duration: 4m`): how long something ran or when is no
# answer, as items.py already says of such a key in an object. The key and separator stay.
# So is a count of the tokens the call consumed (`subagent_tokens: 89,965`): what it cost.
_CLOCK_WORDS = ("elapsed", "duration", "took", "latency", "runtime", "uptime", "time_taken", "timetaken", "timestamp",
                "tokens")
_CLOCK_VALUE = re.compile(
    r"(?i)((?<![A-Za-z0-9])[A-Za-z_]*?(?:elapsed|duration|took|latency|runtime|uptime|time_?taken|timestamp|tokens)"
    r"(?:_?(?:ms|us|ns|s|sec|secs|seconds|millis))?\"?[ \t]*[:=][ \t]*)-?[0-9][0-9_]*(?:,[0-9]{3}(?![0-9]))*(?:\.[0-9]+)?")
_CLOCK_MASK = r"\g<1>" + FRAGMENT
# UUIDs, and twelve or more hex digits with at least one digit and one letter: a request id,
# a container id, a long hash. A short git hash (7-10) stays: a new commit is news.
_IDS = re.compile(
    r"[0-9a-fA-F](?<![0-9A-Za-z_][0-9a-fA-F])(?:[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{11,})(?![0-9A-Za-z_])"
)
_DIGIT = re.compile(r"[0-9]")
# Text beyond this many characters is kept as it is: the cost of masking stays bounded
# (items and the exact digest still see all of it).
MAX_MASKED_CHARS = 16384


def _cut(text: str) -> int:
    """Where masking stops: the last line end within the bound (whole lines: no fragment cut)."""
    return text.rfind("\n", 0, MAX_MASKED_CHARS) + 1 or MAX_MASKED_CHARS


def _bounded(mask: Callable[[str], str], text: str) -> str:
    if len(text) <= MAX_MASKED_CHARS:
        return mask(text)
    cut = _cut(text)
    return mask(text[:cut]) + text[cut:]


def noise_parts(text: str) -> tuple[str, str]:
    """(`noise` of the part of `text` masking reads, the rest as it is): `noise(text)` is
    their concatenation. A long answer's items are taken from the first alone (an unmasked
    line would look new every time)."""
    if len(text) <= MAX_MASKED_CHARS:
        return _noise(text), ""
    cut = _cut(text)
    return _noise(text[:cut]), text[cut:]


def _noise(text: str) -> str:
    # Every fragment holds a digit but a temp path, which holds a slash or a backslash: most
    # short values (a status word, a name) are settled by these scans alone.
    if _DIGIT.search(text) is None and "/" not in text and "\\" not in text:
        return text
    low = text.lower()
    for keys, pattern in _WORD_LED:
        for key in keys:
            if key in low:
                text = pattern.sub(FRAGMENT, text)
                break
    for key in _CLOCK_WORDS:
        if key in low:
            text = _CLOCK_VALUE.sub(_CLOCK_MASK, text)
            break
    return _DIGIT_LED.sub(FRAGMENT, text)


def _ids(text: str) -> str:
    return _IDS.sub(FRAGMENT, text)


def noise(text: str) -> str:
    """`text` with clock readings, durations, pids, attempt counters, temp paths and hex
    addresses masked (ids kept)."""
    return _bounded(_noise, text)


def ids(text: str) -> str:
    """`text` with UUIDs and long mixed hex ids masked."""
    return _bounded(_ids, text)


def shape(text: str) -> str:
    """`noise`, then ids."""
    return ids(noise(text))


def shape_changed(text: str) -> Optional[str]:
    """The shape form of `text`, or None when nothing in it was masked (most results)."""
    masked = shape(text)
    return None if masked == text else masked
