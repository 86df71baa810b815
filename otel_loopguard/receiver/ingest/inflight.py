"""Spans being delivered right now, and who is delivering each.

A span is new to the dedupe table until its request is accepted; meanwhile another request
may carry the same span (an SDK's retry, the Collector exporting to a replica in parallel).
That copy is neither new (two deliveries of one span) nor a duplicate yet (the first delivery
may still fail). Each request claims the new spans it delivers; a copy of a claimed span
waits for the claim to settle, while the rest of its request goes on.
"""

from __future__ import annotations

import asyncio
from typing import Iterable, Optional

Key = bytes  # trace id + span id


class Claim:
    """One delivery's spans: settled (released) once they are remembered or refused."""

    __slots__ = ("keys", "settled", "_table")

    def __init__(self, table: InFlight):
        self.keys: set[Key] = set()
        self.settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._table = table

    def take(self, key: Key) -> None:
        self.keys.add(key)
        self._table._owner[key] = self  # noqa: SLF001 (the table's own record)

    def release(self) -> None:
        """The delivery is over, whatever its outcome: copies waiting for it look again."""
        owner = self._table._owner  # noqa: SLF001
        for key in self.keys:
            if owner.get(key) is self:
                del owner[key]
        self.keys.clear()
        if not self.settled.done():
            self.settled.set_result(None)


class InFlight:
    def __init__(self) -> None:
        self._owner: dict[Key, Claim] = {}

    def claim(self) -> Claim:
        return Claim(self)

    def owner(self, key: Key) -> Optional[Claim]:
        return self._owner.get(key)

    def settled(self, keys: Iterable[Key]) -> list[asyncio.Future[None]]:
        """What to wait for before the spans of these keys can be told new or duplicate."""
        owners = {id(c): c for c in (self._owner.get(k) for k in keys) if c is not None}
        return [c.settled for c in owners.values()]

    def __contains__(self, key: Key) -> bool:
        return key in self._owner

    def __len__(self) -> int:
        return len(self._owner)
