"""Insertion-ordered containers with a size bound: the oldest entries go first.

They keep per-run memory bounded; forgetting the oldest entry can only make an
old result look new again (a missed finding), never invent a loop.

Eviction drops the oldest eighth at once by rebuilding the dict: deleting from
the front of a dict one by one leaves holes that every later `next(iter())`
scans past, which made each insert slower the fuller the container was.
"""

from __future__ import annotations

from itertools import islice
from typing import Callable, Generic, Hashable, Optional, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _trimmed(items: dict, limit: int) -> dict:  # type: ignore[type-arg]
    return dict(islice(items.items(), max(1, limit // 8), None))


class BoundedSet:
    __slots__ = ("_items", "_limit")

    def __init__(self, limit: int):
        self._items: dict[Hashable, None] = {}
        self._limit = limit

    def add(self, item: Hashable) -> bool:
        """Add; True when the item was not present."""
        if item in self._items:
            return False
        if len(self._items) >= self._limit:
            self._items = _trimmed(self._items, self._limit)
        self._items[item] = None
        return True

    def __contains__(self, item: Hashable) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)


class BoundedMap(Generic[K, V]):
    __slots__ = ("_items", "_limit", "_high")

    def __init__(self, limit: int):
        self._items: dict[K, V] = {}
        self._limit = limit
        self._high = 0  # the most entries drop_stale found since the dict was last rebuilt

    def get(self, key: K) -> Optional[V]:
        return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        items = self._items
        if key in items:
            del items[key]  # re-insert: most recently used goes last
        elif len(items) >= self._limit:
            items = self._items = _trimmed(items, self._limit)
        items[key] = value

    def get_or_create(self, key: K, make: Callable[[], V]) -> V:
        value = self._items.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def pop(self, key: K) -> Optional[V]:
        return self._items.pop(key, None)

    def drop_stale(self, stale: Callable[[V], bool]) -> int:
        """Forget entries, oldest first, while `stale(value)` (values that carry the time they
        were put, in the order they were put): cheap when the oldest is not stale, so it can be
        called at every tick. A dict never gives back its table as entries leave, so it is
        rebuilt once it holds under a quarter of what it held at its height. Returns how many
        went."""
        items = self._items
        old = []
        for key, value in items.items():
            if not stale(value):
                break
            old.append(key)
        if old:
            self._high = max(self._high, len(items))
            for key in old:
                del items[key]
            if len(items) < self._high // 4:
                self._items, self._high = dict(items), len(items)
        return len(old)

    def rekey(self, copy: Callable[[K], K]) -> None:
        """The same entries in the same order, each under `copy(key)`, an equal key."""
        self._items = {copy(key): value for key, value in self._items.items()}

    def items(self) -> list[tuple[K, V]]:
        """Oldest first (a copy: a snapshot of the receiver's late cache reads it)."""
        return list(self._items.items())

    def __len__(self) -> int:
        return len(self._items)
