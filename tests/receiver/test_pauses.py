"""`serve` runs the full garbage collections itself, at quiet moments (receiver/pauses.py)."""

from __future__ import annotations

import gc
import weakref
from typing import Iterator

import pytest

from otel_loopguard.receiver import pauses


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def collector() -> Iterator[None]:
    """The process's collector as it was, after the test (take_over changes it for good)."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_nothing_is_collected_unless_serve_took_the_collector_over(collector: None) -> None:
    clock, busy = Clock(), [False]
    full = pauses.FullCollections(lambda: busy[0], clock)
    clock.now += pauses.MAX_FULL_INTERVAL
    assert not pauses.taken_over() and not full.due() and full.tick() == 0


def test_full_collections_wait_for_a_quiet_moment_but_not_forever(collector: None) -> None:
    pauses.take_over()
    assert pauses.taken_over() and gc.get_threshold()[2] == pauses.NEVER_ON_ITS_OWN
    clock, busy = Clock(), [True]
    full = pauses.FullCollections(lambda: busy[0], clock)
    clock.now += pauses.MIN_FULL_INTERVAL
    assert not full.due()  # a request is being handled: not now
    busy[0] = False
    assert full.due()
    clock.now += pauses.MIN_FULL_INTERVAL / 2
    busy[0] = True
    clock.now += pauses.MAX_FULL_INTERVAL - pauses.MIN_FULL_INTERVAL
    assert full.due()  # busy all along: once the longest interval has passed, all the same
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    assert gone() is not None  # a cycle: reference counting alone never frees it
    assert full.tick() >= 1 and gone() is None and full.passes == 1
    assert not full.due()  # the interval starts again
    busy[0] = False
    clock.now += pauses.MIN_FULL_INTERVAL - 1
    assert not full.due()


def test_the_young_generations_still_collect_on_their_own(collector: None) -> None:
    """Short-lived cycles (asyncio's, gRPC's) are freed as before, without a full pass."""
    pauses.take_over()
    young, middle, _ = gc.get_threshold()
    assert (young, middle) == gc.get_threshold()[:2] and young > 0 and gc.isenabled()
    before = gc.get_stats()[0]["collections"]
    for _ in range(young * 3):
        Cycle()
    assert gc.get_stats()[0]["collections"] > before
