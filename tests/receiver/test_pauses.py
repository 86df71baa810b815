"""`serve` runs the full garbage collections itself, at quiet moments (receiver/ops/pauses.py)."""

from __future__ import annotations

import gc
import weakref
from typing import Iterator

import pytest

from otel_loopguard.receiver.ops import pauses


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
    clock, quiet = Clock(), [True]
    full = pauses.FullCollections(lambda: quiet[0], clock)
    clock.now += pauses.MAX_FULL_INTERVAL
    full.request()
    assert not pauses.taken_over() and not full.due() and not full.tick()


def test_full_collections_wait_for_a_quiet_moment_but_not_forever(collector: None) -> None:
    pauses.take_over()
    assert pauses.taken_over() and gc.get_threshold()[2] == pauses.NEVER_ON_ITS_OWN
    clock, quiet = Clock(), [False]
    full = pauses.FullCollections(lambda: quiet[0], clock)
    clock.now += pauses.MIN_FULL_INTERVAL
    assert not full.due()  # a sender is being served: not now
    quiet[0] = True
    assert full.due()
    clock.now += pauses.MIN_FULL_INTERVAL / 2
    quiet[0] = False
    clock.now += pauses.MAX_FULL_INTERVAL - pauses.MIN_FULL_INTERVAL
    assert full.due()  # never quiet: once the longest interval has passed, all the same
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    assert gone() is not None  # a cycle: reference counting alone never frees it
    assert full.tick() and gone() is None and full.passes == 1
    assert not full.due()  # the interval starts again
    quiet[0] = True
    clock.now += pauses.MIN_FULL_INTERVAL - 1
    assert not full.due()


def test_after_a_burst_a_pass_comes_at_the_next_quiet_moment(collector: None) -> None:
    pauses.take_over()
    clock, quiet = Clock(), [False]
    full = pauses.FullCollections(lambda: quiet[0], clock)
    full.request()
    assert not full.due()  # asked, but senders are being served
    quiet[0] = True
    assert full.due() and full.tick()
    assert not full.due()  # done: not asked again


def test_the_young_generations_still_collect_on_their_own(collector: None) -> None:
    """Short-lived cycles (asyncio's, gRPC's) are freed as before, without a full pass."""
    pauses.take_over()
    young, middle, _ = gc.get_threshold()
    assert (young, middle) == gc.get_threshold()[:2] and young > 0 and gc.isenabled()
    before = gc.get_stats()[0]["collections"]
    for _ in range(young * 3):
        Cycle()
    assert gc.get_stats()[0]["collections"] > before
