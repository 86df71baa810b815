"""Finding and run spans on their way downstream, in batches, until delivered (downstream.py
sends them); in inline mode never ahead of the forwarded spans they are about (delivery.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Optional, Sequence

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ...findings.otlp import export_request
from ..ops.metrics import Metrics
from ..state.spool import Recovered, Ref, Spool
from .delivery import ForwardQueue
from .folding import Folder
from .downstream import RETRY_LATER, SENT, Downstream, cancel, take_batch

_log = logging.getLogger("otel_loopguard.receiver")


class FindingQueue:
    """Finding and run spans on their way downstream, in batches, until delivered.

    With a spool (state_dir) each put is written to disk first and acknowledged there once all
    its spans were delivered: findings of runs judged before a crash reach the backend after it."""

    def __init__(
        self, downstream: Downstream, metrics: Metrics, *, capacity: int = 100_000, batch: int = 512,
        timeout: float = 5.0, after: Optional["ForwardQueue"] = None, spool: Optional["Spool"] = None,
        on_delivered: Optional[Callable[[Sequence[Span]], None]] = None,
    ):
        """`after`: the forward queue whose spans a finding must not overtake (inline mode);
        `on_delivered`: told of every batch the downstream took (the opt-in Phoenix annotations)."""
        self._spool = spool
        self._left: dict["Ref", int] = {}  # spans of each record on disk not yet delivered
        self._downstream = downstream
        self._after = after
        self._metrics = metrics
        self._timeout = timeout
        self._in_flight = 0
        self._queue: asyncio.Queue[tuple[Span, Optional["Ref"]]] = asyncio.Queue()
        self._capacity = capacity
        self._batch = batch
        self._task: Optional[asyncio.Task[None]] = None
        self.delivered = asyncio.Event()
        self.on_delivered = on_delivered
        self._folder = Folder(metrics)

    @property
    def full(self) -> bool:
        return self._queue.qsize() >= self._capacity

    @property
    def size(self) -> int:
        """Finding spans waiting or being sent (the memory bound counts them)."""
        return self._queue.qsize() + self._in_flight

    def put(self, spans: list[Span]) -> None:
        """Spans that leave together, folded first: one loop, one finding to read (folding.py)."""
        spans = self._folder.fold(spans)
        ref = None
        if self._spool is not None and spans:
            ref = self._spool.append(export_request(spans).SerializeToString(), len(spans), b"")
            self._left[ref] = len(spans)
        for span in spans:
            self._queue.put_nowait((span, ref))
        self._gauge()

    def requeue(self, recovered: list["Recovered"]) -> None:
        """At start: finding spans a previous process queued and did not deliver."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        for r in recovered:
            request = ExportTraceServiceRequest.FromString(r.payload)  # written by us, CRC-checked
            spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
            self._left[r.ref] = len(spans)
            for span in spans:
                self._queue.put_nowait((span, r.ref))
        self._gauge()

    def _gauge(self) -> None:
        """Waiting plus being sent: with the downstream down, the batch in flight is undelivered too."""
        self._metrics.set_gauge("finding_queue", self._queue.qsize() + self._in_flight)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="loopguard-findings")

    async def _run(self) -> None:
        while True:
            await self._deliver(await take_batch(self._queue, self._batch))

    async def _deliver(self, items: list[tuple[Span, Optional["Ref"]]]) -> None:
        batch = [span for span, _ in items]
        payload = export_request(batch).SerializeToString()
        self._in_flight = len(batch)
        self._gauge()
        try:
            if self._after is not None:  # the spans these findings are about go first
                await self._after.wait_delivered(self._after.last_put)
            while True:
                result = await self._downstream.send(payload, timeout=self._timeout)
                if result.status != RETRY_LATER:
                    break
            if result.status == SENT:
                rejected = min(result.rejected_spans, len(batch))
                self._metrics.inc("finding_spans_exported_total", len(batch) - rejected)
                if self.on_delivered is not None:
                    self.on_delivered(batch)
                if rejected or result.detail:
                    # Partial success is final (OTLP: do not retry): say so rather than count it delivered.
                    self._metrics.inc("finding_spans_dropped_total", rejected)
                    _log.warning("downstream %s rejected %d of %d finding spans: %s", self._downstream.target,
                                 rejected, len(batch), result.detail or "(no message)")
            else:
                self._metrics.inc("finding_spans_dropped_total", len(batch))
                _log.error("downstream refused %d finding spans (%s): dropped", len(batch), result.detail)
            self._done(items)  # not when cancelled at shutdown: then they are sent again next time
        finally:
            self._in_flight = 0
            for _ in batch:
                self._queue.task_done()
            self._gauge()

    def _done(self, items: list[tuple[Span, Optional["Ref"]]]) -> None:
        if self._spool is None:
            return
        for _, ref in items:
            if ref is not None:
                self._left[ref] -= 1
                if not self._left[ref]:
                    del self._left[ref]
                    self._spool.ack(ref)

    async def drain(self, timeout: float) -> bool:
        """Wait until every queued span was delivered (or give up at the timeout)."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
            return True
        except asyncio.TimeoutError:
            lost = self._queue.qsize() + self._in_flight
            if self._spool is not None:
                _log.warning("shutdown: %d finding spans not yet delivered stay in the state directory", lost)
                return False
            self._metrics.inc("finding_spans_dropped_total", lost)
            _log.error("shutdown: %d finding spans could not be delivered", lost)
            return False

    async def stop(self) -> None:
        await cancel(self._task)
        if self._spool is not None:
            self._spool.close()
