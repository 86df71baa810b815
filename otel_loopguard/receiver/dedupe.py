"""Span deduplication by (trace id, span id), bounded by size and age.

OTLP allows at-least-once delivery: a re-delivered span is dropped and
counted; a different span under an id already seen is kept first-wins and
reported as a conflict. Checking and remembering are separate steps so a
request is remembered only once it was accepted (forwarded), never before.
"""

from __future__ import annotations

import time
from typing import Callable

NEW, DUPLICATE, CONFLICT = "new", "duplicate", "conflict"

Key = bytes  # trace id + span id
Content = int  # a cheap summary of the span's content


class SpanDeduper:
    def __init__(self, max_size: int, ttl_seconds: float, clock: Callable[[], float] = time.monotonic):
        self._seen: dict[Key, tuple[Content, float]] = {}  # insertion order = age order
        self._max = max_size
        self._ttl = ttl_seconds
        self._clock = clock
        self.evictions = 0

    def check(self, key: Key, content: Content) -> str:
        entry = self._seen.get(key)
        if entry is None:
            return NEW
        return DUPLICATE if entry[0] == content else CONFLICT

    def remember(self, key: Key, content: Content) -> None:
        now = self._clock()
        if key not in self._seen:
            self._expire(now)
        self._seen[key] = (content, now)

    def _expire(self, now: float) -> None:
        seen = self._seen
        while seen:
            oldest = next(iter(seen))
            if len(seen) < self._max and now - seen[oldest][1] < self._ttl:
                return
            del seen[oldest]
            self.evictions += 1

    def __len__(self) -> int:
        return len(self._seen)
