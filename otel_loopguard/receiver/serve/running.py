"""A started receiver (`Running`): what tests and the CLI reach and stop, and its timer.

Shutdown is graceful: stop taking requests, complete every open run, deliver
the queued findings (bounded wait), then close the downstream channel.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import grpc
from grpc_health.v1 import health
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ... import local_receivers
from ..ingest.dedupe import SpanDeduper
from ..ops import pauses, trim
from ..ops.budget import MIB, MemoryBudget
from ..ops.metrics import Metrics
from ..ops.pauses import FullCollections
from ..out.delivery import ForwardQueue
from ..out.downstream import Downstream
from ..out.finding_queue import FindingQueue
from ..out.phoenix import PhoenixAnnotator
from ..runs.assembly import RunAssembler
from ..runs.buffer import RunBuffer
from ..state import snapshot
from ..state.directory import Opened
from ..state.judged import JudgedLog
from .reload import Reloader
from ..front.service import TraceReceiver

_log = logging.getLogger("otel_loopguard.receiver")
TICK_SECONDS = 0.25
# The timer's work goes on the event loop in slices this long at most (plus one run), so that
# the runs of a burst completing in one tick do not hold up every request meanwhile.
TICK_SLICE_SECONDS = 0.005


@dataclass(kw_only=True)
class Running:
    """A started receiver: what tests and the CLI need to reach and stop it."""

    server: grpc.aio.Server
    port: int
    receiver: TraceReceiver
    metrics: Metrics
    assembler: RunAssembler
    findings: FindingQueue
    downstream: Downstream
    metrics_port: Optional[int]
    _tasks: list[asyncio.Task[None]]
    _metrics_server: Optional[asyncio.base_events.Server]
    _health: health.aio.HealthServicer
    reloader: Optional[Reloader] = None
    forward_queue: Optional[ForwardQueue] = None  # inline mode, answering once queued
    annotator: Optional[PhoenixAnnotator] = None
    note: Optional[Path] = None  # where this receiver told local apps where it forwards
    state: Optional[Opened] = None  # the state directory (state_dir), when there is one

    def reload(self) -> None:
        """What SIGHUP does: policy, certificates and tokens, each checked before it is used."""
        if self.reloader is not None:
            self.reloader.reload()

    async def stop(self, grace: float = 5.0) -> None:
        await self._health.enter_graceful_shutdown()
        await self.server.stop(grace)
        if self.state is not None:  # no span is taken from here on: the next process's boundary
            self.state.state.beat()
        await self.receiver.settle(grace)
        for task in self._tasks:
            task.cancel()
        if self.forward_queue is not None:  # the spans senders were told are taken, before their findings
            await self.forward_queue.drain(timeout=grace)
        saving = self.assembler.release_for_snapshot() if self.state is not None else []
        cut = [b.run_id for b in self.assembler.runs.values() if b.root_ended_at is None and b.tool_calls_seen]
        self.findings.put(self.assembler.flush(shutdown=True))
        if self.state is not None:
            self._save_open_runs(self.state, saving, cut)
        if self.receiver.judged is not None:  # every open run is saved or judged now
            self.receiver.judged.all_judged()
            self.receiver.judged.close()
        await self._close(grace)

    async def _close(self, grace: float) -> None:
        """Deliver what is queued (bounded wait), then let every worker, port and file go."""
        await self.findings.drain(timeout=grace)
        await self.findings.stop()
        if self.annotator is not None:
            await self.annotator.drain(timeout=grace)
            await self.annotator.stop()
        if self.forward_queue is not None:
            await self.forward_queue.stop()
        if self._metrics_server is not None:
            self._metrics_server.close()
        await self.downstream.close()
        if self.state is not None:
            self.state.close()
        local_receivers.withdraw(self.note)
        _log.info("otel-loopguard receiver stopped")

    def _save_open_runs(self, state: Opened, runs: list[RunBuffer], cut: list[str]) -> None:
        """Open runs go to the state directory unjudged, for the next process to go on with, with
        the late cache and the runs judged as cut; if they cannot be written they are judged
        here, as cut (restart.py)."""
        now = time.monotonic()
        try:
            saved = snapshot.save(state.state.path, runs, self.assembler.fingerprinter, now, state.dense_seq,
                                  self.assembler.late_cache(now), cut)
            _log.info("shutdown: %d open runs saved to the state directory for the next start", saved)
        except OSError as exc:
            _log.error("shutdown: cannot save the open runs to %s (%s): they are judged now, as cut",
                       state.state.path, exc.strerror or exc)
            for buffer in runs:
                self.assembler.adopt(buffer, [])
            self.findings.put(self.assembler.flush(shutdown=True))


@dataclass(kw_only=True)
class Memory:
    """What the timer does for the memory bound: expire dedupe entries, shed runs, trim the heap."""

    deduper: SpanDeduper
    budget: MemoryBudget
    receiver: TraceReceiver
    assembler: RunAssembler

    def __post_init__(self) -> None:
        self.trimmer = trim.Trimmer(max(16 * MIB, self.budget.limit // 16))
        self.collections = FullCollections(lambda: self.receiver.quiet_for() >= pauses.QUIET_SECONDS)

    async def tick(self, metrics: Metrics) -> None:
        self.deduper.expire()
        self.receiver.shed_runs()
        estimate = self.budget.usage().total
        metrics.set_gauge("memory_estimate_bytes", estimate)
        metrics.set_gauge("dedupe_entries", len(self.deduper))
        metrics.set_gauge("dedupe_evictions_total", self.deduper.evictions)
        collected = self.collections.tick()
        due = self.trimmer.due(estimate)
        if due == trim.SETTLED:  # the burst is over: what it cached goes too, its cycles when quiet
            trim.forget_caches(self.assembler.fingerprinter)
            self.collections.request()
        if (due or collected) and trim.available():
            await asyncio.to_thread(trim.release_free_memory)  # ctypes lets go of the GIL meanwhile
            if due == trim.SETTLED:
                self.assembler.repack(trim.copied)
                await asyncio.to_thread(trim.release_free_memory)


async def _advance_runs(assembler: RunAssembler, findings: FindingQueue, judged: Optional[JudgedLog]) -> None:
    """The runs' timers (assembler.ticking), the event loop let go between slices. A run's
    spans are queued together (folding.py folds within a run only)."""
    spans: list[Span] = []
    started = time.monotonic()
    for part in assembler.ticking():
        spans += part
        if time.monotonic() - started >= TICK_SLICE_SECONDS:
            _queued(spans, findings, judged)
            spans = []
            await asyncio.sleep(0)  # requests' turn
            started = time.monotonic()
    _queued(spans, findings, judged)


def _queued(spans: list[Span], findings: FindingQueue, judged: Optional[JudgedLog]) -> None:
    findings.put(spans)
    if judged is not None:  # after the findings are queued (on disk): their requests are done
        judged.settle()


async def tick(assembler: RunAssembler, findings: FindingQueue, metrics: Metrics, state: Optional[Opened],
               judged: Optional[JudgedLog], memory: Memory) -> None:
    while True:
        await asyncio.sleep(TICK_SECONDS)
        try:
            if state is not None:
                state.state.beat()
            await _advance_runs(assembler, findings, judged)
            metrics.set_gauge("buffered_calls", assembler.buffered_calls)
            metrics.set_gauge("runs_open", len(assembler.runs))
            await memory.tick(metrics)
        except Exception:  # a bug here must not stop the receiver; it is logged loudly
            _log.exception("run completion failed")
