"""Span deduplication by (trace id, span id), bounded by size and age.

OTLP allows at-least-once delivery: a re-delivered span is dropped and
counted; a different span under an id already seen is kept first-wins and
reported as a conflict. Checking and remembering are separate steps so a
request is remembered only once it was accepted (forwarded), never before.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Iterable

NEW, DUPLICATE, CONFLICT = "new", "duplicate", "conflict"

Key = bytes  # trace id + span id
Content = int  # a cheap summary of the span's content
COMPACT_FROM = 4096  # tables smaller than this are not worth copying


class SpanDeduper:
    def __init__(self, max_size: int, ttl_seconds: float, clock: Callable[[], float] = time.monotonic):
        self._seen: dict[Key, Content] = {}
        self._order: deque[tuple[float, Key]] = deque()  # age order; O(1) at both ends
        self._max = max_size
        self._ttl = ttl_seconds
        self._clock = clock
        self.evictions = 0
        self._high = 0  # the most entries the table held since it was last rebuilt

    def check(self, key: Key, content: Content) -> str:
        seen = self._seen.get(key)
        if seen is None:
            return NEW
        return DUPLICATE if seen == content else CONFLICT

    def remember(self, key: Key, content: Content) -> None:
        self.remember_all(((key, content),))

    def remember_all(self, spans: Iterable[tuple[Key, Content]]) -> None:
        """Remember an accepted request's spans, with one clock reading for all of them (a
        request carries hundreds of spans)."""
        now = self._clock()
        seen, order, limit, ttl = self._seen, self._order, self._max, self._ttl
        for key, content in spans:
            if key in seen:
                continue
            # Before each insert, as one span at a time would: the same bound and ages for
            # any size and TTL (zero included).
            while order and (len(seen) >= limit or now - order[0][0] >= ttl):
                del seen[order.popleft()[1]]
                self.evictions += 1
            seen[key] = content
            order.append((now, key))

    def expire(self) -> None:
        """Forget the entries older than the TTL now (the run timer calls this): otherwise they
        leave only as new spans push them out, and memory would not come back after a burst."""
        now, seen, order = self._clock(), self._seen, self._order
        self._high = max(self._high, len(seen))
        while order and now - order[0][0] >= self._ttl:
            del seen[order.popleft()[1]]
            self.evictions += 1
        self._compact()

    def _compact(self) -> None:
        """A dict never shrinks its table as entries leave: grown to a burst's million slots it
        keeps them with nothing in them. Copied once it holds under a quarter of its high point,
        the table is sized to what is left."""
        if self._high >= COMPACT_FROM and len(self._seen) < self._high // 4:
            self._seen = dict(self._seen)
            self._high = len(self._seen)

    def __len__(self) -> int:
        return len(self._seen)
