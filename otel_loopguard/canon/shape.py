"""Volatile fragments masked INSIDE text: the shape form of a result (docs/equivalence.md).

volatile.py masks whole values shaped like ids or clock readings. A log line or a test
report carries its noise inside longer text: "12:04:31.552 attempt 3 failed after 1.2s
(pid 4711, /tmp/tmpa8f3k2)". Two answers that differ only there are the same answer.

Two strengths, both pure regular expressions over text (no native path, so every shell
gets the same result):

- `noise`: clock readings (date-times, times of day, epoch numbers), durations, process
  ids, attempt counters, temp paths, hex addresses. Used for a result's *items*: an item
  keeps the ids it names (a page of new record ids is new).
- `shape`: `noise` plus ids (UUIDs, long hex ids): used for the result's *shape digest*,
  compared only with earlier answers of the same action.

A date alone is never masked (a due date is business data), and masking is applied to
results only: an action's identity (its arguments) is never shape-masked.
"""

from __future__ import annotations

import re
from typing import Optional

# Stands in for a masked fragment. A raw NUL never occurs in canonical JSON (it is escaped),
# so masked text never equals the text of a result with nothing masked.
FRAGMENT = "\x00"

_DATETIME = (r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d{1,9})?"
             r"(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?")
_TIME = r"(?<![\d:])\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?![\d:])"
_EPOCH = r"(?<![\w.])1[0-9]{9}(?:[0-9]{3}){0,3}(?:\.\d{1,9})?(?![\w])"
_DURATION = (r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?)"
             r"(?![A-Za-z0-9])")
_PID = r"(?i:\bpid\b\s*[:=#]?\s*)\d+"
_ATTEMPT = (r"(?i:\b(?:attempt|retry|retries|try|tries|iteration|round)\b\s*(?:#|no\.?|number)?\s*)"
            r"\d+(?:\s*(?:/|of)\s*\d+)?")
_TEMP = (r"(?:/tmp|/var/tmp|/private/var/folders|/var/folders|/dev/shm)/[^\s\"'\\,;:)\]}]*"
         r"|(?i:[A-Z]:\\\\(?:[^\s\"\\]+\\\\)*?Temp\\\\)[^\s\"'\\,;]*")
_HEXADDR = r"\b0x[0-9a-fA-F]{4,}\b"

_UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
# Twelve or more hex digits with at least one digit and one letter: a request id, a
# container id, a long hash. A short git hash (7-10) stays: a new commit is news.
_HEXID = r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{12,}\b"

_NOISE = re.compile("|".join(f"(?:{p})" for p in (_DATETIME, _TEMP, _TIME, _HEXADDR, _PID, _ATTEMPT,
                                                   _DURATION, _EPOCH)))
_SHAPE = re.compile("|".join(f"(?:{p})" for p in (_DATETIME, _TEMP, _UUID, _HEXID, _TIME, _HEXADDR, _PID,
                                                   _ATTEMPT, _DURATION, _EPOCH)))
# Cheap pre-check: every pattern above needs a digit (a temp path aside).
_MAY_MASK = re.compile(r"\d|/tmp|/var/|/dev/shm|Temp\\")


def noise(text: str) -> str:
    """`text` with clock readings, durations, pids, attempt counters, temp paths and hex
    addresses masked (ids kept)."""
    if _MAY_MASK.search(text) is None:
        return text
    return _NOISE.sub(FRAGMENT, text)


def shape(text: str) -> str:
    """`noise`, and ids (UUIDs, long hex ids) masked too."""
    if _MAY_MASK.search(text) is None:
        return text
    return _SHAPE.sub(FRAGMENT, text)


def shape_changed(text: str) -> Optional[str]:
    """The shape form of `text`, or None when nothing in it was masked (most results)."""
    masked = shape(text)
    return None if masked == text else masked
