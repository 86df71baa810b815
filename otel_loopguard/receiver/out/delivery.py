"""Inline mode's forward queue: accepted requests wait here for the downstream.

A sender is answered once its spans are in this queue, so a backend outage is absorbed up to
the queue's bound instead of being pushed back to senders that may not retry for long (the
OpenTelemetry SDK's exporter gives up after its 10 s timeout and drops the batch). When the
queue is full the receiver answers UNAVAILABLE with RetryInfo at once. `consumers` workers
send in parallel, each retrying its request with backoff until the downstream takes it or
refuses it for good; a refusal after the sender was answered can only be counted and logged.

Without a state directory the queue lives in memory: what it holds when the process stops
without reaching the downstream is lost (logged with a count). With one (`state_dir`), every
request is also written to disk before its sender is answered and acknowledged there once
delivered (spool.py): a restart or a crash loses nothing, and what was left is sent first by
the next process.

`delivered_through()` is the highest id below which every request was delivered (or refused):
finding spans wait for it, so they never overtake the spans they are about.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Optional

from .downstream import RETRY_LATER, SENT, Downstream, cancel
from ..ops.metrics import Metrics
from ..state.spool import Recovered, Ref, Spool

_log = logging.getLogger("otel_loopguard.receiver")


class ForwardQueue:
    def __init__(self, downstream: Downstream, metrics: Metrics, *, capacity_bytes: int, consumers: int = 4,
                 attempt_seconds: float = 5.0, spool: Optional[Spool] = None):
        self._spool = spool
        self._refs: dict[int, Ref] = {}  # item id -> its record on disk (with a spool)
        self._downstream = downstream
        self._metrics = metrics
        self._capacity = capacity_bytes
        self._consumers = consumers
        self._attempt = attempt_seconds
        self._items: deque[tuple[int, bytes, int]] = deque()  # (id, payload, spans)
        self._in_flight: dict[int, tuple[int, int]] = {}  # id -> (payload bytes, spans)
        self._bytes = 0  # waiting and in flight
        self._next_id = 1
        self._changed = asyncio.Event()  # set and replaced at every change: waiters look again
        self._tasks: list[asyncio.Task[None]] = []

    def room_for(self, size: int) -> bool:
        """An empty queue takes any request the receiver accepts; otherwise up to the bound."""
        return self._bytes == 0 or self._bytes + size <= self._capacity

    @property
    def size_bytes(self) -> int:
        """Bytes of requests waiting or being sent (the memory bound counts them)."""
        return self._bytes

    @property
    def last_put(self) -> int:
        return self._next_id - 1

    def put(self, payload: bytes, spans: int, keys: bytes = b"") -> Optional[Ref]:
        """Queued (and on disk, with a spool) when this returns: the sender may be answered.
        `keys`: the spans' trace id + span id, kept with the record for the next process's dedupe."""
        ref = None
        if self._spool is not None:
            ref = self._refs[self._next_id] = self._spool.append(payload, spans, keys)
        self._items.append((self._next_id, payload, spans))
        self._next_id += 1
        self._bytes += len(payload)
        self._gauges()
        self._notify()
        return ref

    def requeue(self, recovered: list[Recovered]) -> None:
        """At start: what the previous process accepted and did not deliver goes first."""
        for r in recovered:
            if r.delivered:
                continue
            self._refs[self._next_id] = r.ref
            self._items.append((self._next_id, r.payload, r.spans))
            self._next_id += 1
            self._bytes += len(r.payload)
        self._gauges()

    def delivered_through(self) -> int:
        waiting = [self._items[0][0]] if self._items else []
        return min([*self._in_flight, *waiting], default=self._next_id) - 1

    async def wait_delivered(self, upto: int) -> None:
        while self.delivered_through() < upto:
            await self._changed.wait()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._consume(), name=f"loopguard-forward-{n}") for n in range(self._consumers)]

    async def drain(self, timeout: float) -> bool:
        """At shutdown: wait for the queue to empty; what is left is lost, and said so."""
        try:
            await asyncio.wait_for(self.wait_delivered(self.last_put), timeout)
            return True
        except asyncio.TimeoutError:
            spans = sum(s for _, _, s in self._items) + sum(s for _, s in self._in_flight.values())
            if self._spool is not None:
                _log.warning("shutdown: %d accepted requests (%d spans) not yet delivered to %s stay in the state "
                             "directory for the next start", len(self._items) + len(self._in_flight), spans,
                             self._downstream.target)
                return False
            _log.error("shutdown: %d accepted requests (%d spans) not delivered to %s, which is unavailable",
                       len(self._items) + len(self._in_flight), spans, self._downstream.target)
            self._metrics.inc("spans_dropped_downstream_total", spans)
            return False

    async def stop(self) -> None:
        await asyncio.gather(*(cancel(task) for task in self._tasks))
        if self._spool is not None:
            self._spool.close()

    async def _consume(self) -> None:
        while True:
            while not self._items:
                await self._changed.wait()
            item_id, payload, spans = self._items.popleft()
            self._in_flight[item_id] = (len(payload), spans)
            try:
                await self._send(payload, spans)
                ref = self._refs.pop(item_id, None)
                if ref is not None:  # not when cancelled at shutdown: then it is sent again next time
                    self._spool.ack(ref)  # type: ignore[union-attr]
            finally:
                self._bytes -= self._in_flight.pop(item_id)[0]
                self._gauges()
                self._notify()

    async def _send(self, payload: bytes, spans: int) -> None:
        while True:
            result = await self._downstream.send(payload, self._attempt)
            if result.status != RETRY_LATER:
                break
        if result.status == SENT:
            rejected = min(result.rejected_spans, spans)
            self._metrics.inc("spans_forwarded_total", spans - rejected)
            if rejected:  # partial success is final (OTLP), and the sender has its answer already
                self._metrics.inc("spans_rejected_downstream_total", rejected)
                _log.warning("downstream %s rejected %d of %d forwarded spans: %s", self._downstream.target,
                             rejected, spans, result.detail or "(no message)")
            return
        self._metrics.inc("spans_dropped_downstream_total", spans)
        _log.error("downstream %s refused %d forwarded spans for good (%s %s): dropped", self._downstream.target,
                   spans, result.code.name if result.code else "error", result.detail)

    def _gauges(self) -> None:
        self._metrics.set_gauge("forward_queue_bytes", self._bytes)
        self._metrics.set_gauge("forward_queue_requests", len(self._items) + len(self._in_flight))

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


def queue_for(downstream: Optional[Downstream], metrics: Metrics, *, capacity_bytes: int, consumers: int,
              attempt_seconds: float, spool: Optional[Spool] = None) -> Optional[ForwardQueue]:
    """Inline mode with a queue (capacity > 0); None for findings-only or the synchronous mode."""
    if downstream is None or capacity_bytes <= 0:
        return None
    return ForwardQueue(downstream=downstream, metrics=metrics, capacity_bytes=capacity_bytes, consumers=consumers,
                        attempt_seconds=attempt_seconds, spool=spool)
