"""When the `serve` process lets CPython's cyclic garbage collector stop the world.

A full (generation 2) collection walks every tracked object the process holds: open runs,
their calls, the spans of requests being judged. CPython starts one on its own whenever
the objects that survived into the oldest generation grew by a quarter, which is exactly
what a large request does while it is judged (its spans live for the whole request). Each
such pass stops every sender's request for as long as it walks (docs/reliability.md,
"One huge request"), several times a request.

So `serve` keeps the young collections (they find the short cycles asyncio and gRPC make)
and runs the full ones itself: on a tick when no request is in hand and none arrived for
QUIET_SECONDS (at most every MIN_FULL_INTERVAL seconds, or as soon as asked after a burst),
and at the latest every MAX_FULL_INTERVAL seconds, busy or not, so cycles that did reach
the oldest generation are still freed. Under a steady sender there is no quiet moment: its
requests wait for that one pass, as they would for CPython's own. Objects made before the
server starts (modules, their constants) are frozen out of every collection: they live as
long as the process.

Only the `serve` command calls `take_over()`; a receiver started inside another program
(tests, an app embedding it) leaves that program's collector alone.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Callable

_log = logging.getLogger("otel_loopguard.receiver")
NEVER_ON_ITS_OWN = 1 << 30  # generation-1 passes before CPython would start a full one
MIN_FULL_INTERVAL = 30.0  # seconds: an idle receiver does not walk its objects more often
QUIET_SECONDS = 1.0  # no request for this long: a pass now holds up no sender
MAX_FULL_INTERVAL = 300.0  # seconds: a receiver never idle still gets a full pass this often


def take_over() -> None:
    """Full collections from now on only through FullCollections.tick (the `serve` process)."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, NEVER_ON_ITS_OWN)


def taken_over() -> bool:
    return gc.isenabled() and gc.get_threshold()[2] == NEVER_ON_ITS_OWN


class FullCollections:
    """Full collections at quiet moments, once `take_over()` has turned the automatic ones off.
    `quiet()`: no request in hand and none arrived for a while (a pass stops every sender)."""

    def __init__(self, quiet: Callable[[], bool], clock: Callable[[], float] = time.monotonic):
        self._quiet = quiet
        self._clock = clock
        self._last = clock()
        self._asked = False
        self.passes = 0

    def request(self) -> None:
        """A pass at the next quiet moment, however recent the last one (after a burst)."""
        self._asked = True

    def due(self) -> bool:
        if not taken_over():
            return False
        waited = self._clock() - self._last
        return waited >= MAX_FULL_INTERVAL or ((self._asked or waited >= MIN_FULL_INTERVAL) and self._quiet())

    def tick(self) -> bool:
        """A full collection if one is due; whether it ran."""
        if not self.due():
            return False
        started = self._clock()
        freed = gc.collect()
        self._last, self._asked = self._clock(), False
        self.passes += 1
        _log.debug("full garbage collection: %d objects freed in %.3f s", freed, self._last - started)
        return True
