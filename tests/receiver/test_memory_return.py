"""Memory a burst took comes back once it is over (docs/reliability.md, "Overload"): the
dedupe table and the side tables give back their dict tables, the caches a burst filled are
emptied, and the receiver's timer says when (receiver/ops/trim.py). Measured with tracemalloc,
in process; the real process's resident memory is tests/reliability/test_overload.py.
"""

from __future__ import annotations

import os
import tracemalloc
from typing import Callable

import pytest

from otel_loopguard.bounded import BoundedMap
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.otlp import spans, wire
from otel_loopguard.policy import Policy
from otel_loopguard.receiver.ops import trim
from otel_loopguard.receiver.ingest.dedupe import SpanDeduper

MIB = 1 << 20


def _traced(make: Callable[[], object]) -> int:
    """Bytes tracemalloc sees still allocated after `make` ran (its result dropped)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = make()
        after = tracemalloc.get_traced_memory()[0]
        del kept
        return after - before
    finally:
        tracemalloc.stop()


def _burst(deduper: SpanDeduper, n: int) -> None:
    deduper.remember_all((os.urandom(24), i) for i in range(n))


@pytest.mark.parametrize("expired", [True, False])
def test_the_dedupe_table_gives_its_slots_back_once_a_burst_expired(expired: bool) -> None:
    now = [0.0]

    def burst_then_quiet() -> SpanDeduper:
        deduper = SpanDeduper(1_000_000, 30.0, lambda: now[0])
        _burst(deduper, 200_000)
        deduper.expire()  # the timer saw the burst at its height
        now[0] = 31.0 if expired else 29.0
        _burst(deduper, 100)  # a little traffic after it
        deduper.expire()
        return deduper

    kept = _traced(burst_then_quiet)
    if expired:  # 100 entries left: their keys and a table for them, not the 200k slots (~10 MiB)
        assert kept < 200 * 1024
    else:  # negative control: nothing expired, all of it is still in use
        assert kept > 20 * MIB


def test_stale_entries_go_oldest_first_and_the_table_shrinks_with_them() -> None:
    def filled_then_dropped() -> tuple[BoundedMap[int, float], list[int]]:
        table: BoundedMap[int, float] = BoundedMap(1_000_000)
        for i in range(100_000):
            table.put(i, i / 1000)  # put at 0..100 s
        table.put(-1, 500.0)
        table.put(-2, 1.0)  # stale, but after a fresh one: kept until the fresh one goes
        # a timer going through the quiet spell, a few seconds at a time
        return table, [table.drop_stale(lambda at: at < now) for now in range(0, 200, 3)]

    tracemalloc.start()
    try:
        table, went = filled_then_dropped()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert sum(went) == 100_000 and max(went) == 3000 and table.items() == [(-1, 500.0), (-2, 1.0)]
    assert kept < 64 * 1024  # the 100k-entry table (~5 MiB) went with its entries
    assert table.drop_stale(lambda at: at < 1000.0) == 2 and len(table) == 0


def test_the_timer_trims_as_a_burst_comes_down_and_releases_once_it_is_over() -> None:
    t = trim.Trimmer(step=10)
    # quiet, a burst rising, coming down in steps, then settled; then a rise and fall under a step
    estimates = [0, 5, 40, 60, 55, 49, 45, 38, 30, 30, 30, 30, 36, 33, 30, 30]
    due = [t.due(e) for e in estimates]
    assert due == [None, None, None, None, None, trim.TRIM, None, trim.TRIM, None, trim.SETTLED,
                   None, None, None, None, None, None]


def test_forgetting_the_caches_changes_no_digest_and_empties_them() -> None:
    fp = Fingerprinter(load_key(key=b"k" * 32), Policy())
    rule = fp.policy.rule("lookup")
    before = fp.action_digest("lookup", rule, '{"q": 1}')
    spans.hex_id(b"\x01" * 16)
    wire.attributes({"loopguard.run.id": "r"}, wire.SPAN_ATTRIBUTE)
    trim.forget_caches(fp)
    assert spans.hex_id.cache_info().currsize == 0
    assert fp.action_digest("lookup", rule, '{"q": 1}') == before  # the same digest, computed again


@pytest.mark.parametrize("text", ["conv-1", "0a" * 16, "é" * 40, "x", ""])
def test_a_copied_key_is_equal_and_new(text: str) -> None:
    copy = trim.copied(text)
    assert copy == text and type(copy) is str
    assert copy is not text or len(text) < 2  # one character or none: CPython keeps one object of each
