"""Insertion-ordered containers with a size bound: the oldest entry goes first.

They keep per-run memory bounded; forgetting the oldest entry can only make an
old result look new again (a missed finding), never invent a loop.
"""

from __future__ import annotations

from typing import Generic, Hashable, Optional, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


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
            del self._items[next(iter(self._items))]
        self._items[item] = None
        return True

    def __len__(self) -> int:
        return len(self._items)


class BoundedMap(Generic[K, V]):
    __slots__ = ("_items", "_limit")

    def __init__(self, limit: int):
        self._items: dict[K, V] = {}
        self._limit = limit

    def get(self, key: K) -> Optional[V]:
        return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        items = self._items
        if key in items:
            del items[key]  # re-insert: most recently used goes last
        elif len(items) >= self._limit:
            del items[next(iter(items))]
        items[key] = value

    def pop(self, key: K) -> Optional[V]:
        return self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)
