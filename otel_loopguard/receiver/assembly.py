"""Routes decoded spans to their runs, runs timers, and completes runs.

A run is complete when its root span has ended plus a grace period, or after
an idle timeout. Spans of a run that was already completed are "late": like
the Collector's tail sampler with its decision cache, they are forwarded but
not judged again, and counted.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ..bounded import BoundedMap
from ..findings import Finding
from ..findings.otlp import Placement, finding_span, place, run_span
from ..fingerprint import Fingerprinter
from .config import ReceiverConfig
from .decode import Decoded
from .metrics import Metrics
from .runs import RunBuffer

_log = logging.getLogger("otel_loopguard.receiver")
MAX_PARENT_CHECKS = 1024


class RunAssembler:
    def __init__(
        self,
        fp: Fingerprinter,
        config: ReceiverConfig,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._fp = fp
        self._config = config
        self._metrics = metrics
        self._clock = clock
        self.runs: dict[str, RunBuffer] = {}
        self._trace_runs: dict[bytes, set[str]] = {}
        self._roots = BoundedMap[bytes, tuple[str, float]](100_000)  # trace -> (root span id, ended at)
        self._completed = BoundedMap[str, float](config.late_cache_size)
        self._children = BoundedMap[bytes, tuple[str, int, int]](100_000)  # parent span -> run, child start, end

    @property
    def buffered_calls(self) -> int:
        return sum(r.buffered for r in self.runs.values())

    def accept(self, spans: list[Decoded]) -> list[Span]:
        now = self._clock()
        out: list[Span] = []
        for d in spans:
            try:
                out += self._accept_one(d, now)
            except Exception:  # one bad span must not cost the others their judgement
                self._metrics.inc("internal_errors_total")
                _log.exception("could not judge span %s of trace %s", d.span_id.hex(), d.trace_id.hex())
        return out

    def _accept_one(self, d: Decoded, now: float) -> list[Span]:
        out: list[Span] = []
        self._touch(d, now)
        if d.run_id is None:
            return out
        buffer = self._run(d.run_id, d.trace_id, now)
        if buffer is None:
            self._metrics.inc("late_spans_total")
            return out
        if d.call is not None:
            self._watch_parent(d, buffer)
            out += self._emit(buffer, buffer.add_call(d.call, now))
        elif d.model is not None:
            out += self._emit(buffer, buffer.add_model(d.model, now))
        if d.facts:
            buffer.note_facts(d.facts)
        return out

    def duplicate(self, d: Decoded) -> list[Span]:
        """A re-delivered tool span: one info finding, never a repeated call."""
        buffer = self.runs.get(d.run_id or "")
        if buffer is None or d.call is None:
            return []
        return self._emit(buffer, [buffer.telemetry_duplicate(d.span_id.hex(), max(d.call.seq, 0))])

    def conflict(self, d: Decoded) -> list[Span]:
        """A different tool span under an id already seen: the first one stays."""
        buffer = self.runs.get(d.run_id or "")
        if buffer is None or d.call is None:
            return []
        return self._emit(buffer, [buffer.span_conflict(d.span_id.hex(), max(d.call.seq, 0))])

    def tick(self) -> list[Span]:
        now = self._clock()
        out: list[Span] = []
        for run_id, buffer in list(self.runs.items()):
            out += self._emit(buffer, buffer.expire_gap(now, self._config.gap_wait_seconds))
            if self._is_complete(buffer, now):
                out += self._complete(run_id)
        return out

    def flush(self) -> list[Span]:
        out: list[Span] = []
        for run_id in list(self.runs):
            out += self._complete(run_id)
        return out

    # -- internals ---------------------------------------------------------------
    def _run(self, run_id: str, trace_id: bytes, now: float) -> Optional[RunBuffer]:
        buffer = self.runs.get(run_id)
        if buffer is not None:
            if trace_id not in buffer.traces:
                buffer.traces.add(trace_id)
                self._trace_runs.setdefault(trace_id, set()).add(run_id)
            return buffer
        if self._completed.get(run_id) is not None:
            return None
        buffer = self.runs[run_id] = RunBuffer(run_id, self._fp, now)
        self._metrics.set_gauge("runs_open", len(self.runs))
        buffer.traces.add(trace_id)
        self._trace_runs.setdefault(trace_id, set()).add(run_id)
        root = self._roots.get(trace_id)
        if root is not None:
            self._root_seen(buffer, trace_id, root[0], root[1])
        return buffer

    @staticmethod
    def _root_seen(buffer: RunBuffer, trace_id: bytes, root_id: str, now: float) -> None:
        """A root span ended. It ends the run only when the run is that one trace; a run
        keyed by a conversation id may go on in other traces, so it waits for idleness."""
        buffer.root_id = buffer.root_id or root_id
        if buffer.run_id == trace_id.hex():
            buffer.root_ended_at = now

    def _touch(self, d: Decoded, now: float) -> None:
        run_ids = self._trace_runs.get(d.trace_id, ())
        for run_id in run_ids:
            buffer = self.runs.get(run_id)
            if buffer is not None:
                buffer.last_activity = now
                if not d.parent:
                    self._root_seen(buffer, d.trace_id, d.span_id.hex(), now)
        if not d.parent:
            self._roots.put(d.trace_id, (d.span_id.hex(), now))
        self._check_parent(d)

    def _watch_parent(self, d: Decoded, buffer: RunBuffer) -> None:
        if d.parent:
            self._children.put(d.parent, (buffer.run_id, d.start, d.end))

    def _check_parent(self, d: Decoded) -> None:
        child = self._children.pop(d.span_id)
        if child is None:
            return
        run_id, start, end = child
        if start < d.start or (d.end and end > d.end):
            self._metrics.inc("clock_skew_total")
            buffer = self.runs.get(run_id)
            if buffer is not None:
                buffer.clock_skew = True
            _log.debug("clock skew in run %s: a tool call lies outside its parent span", run_id)

    def _is_complete(self, buffer: RunBuffer, now: float) -> bool:
        if buffer.root_ended_at is not None and now - buffer.root_ended_at >= self._config.root_grace_seconds:
            return True
        return now - buffer.last_activity >= self._config.idle_timeout_seconds

    def _complete(self, run_id: str) -> list[Span]:
        buffer = self.runs.pop(run_id)
        try:
            out = self._emit(buffer, buffer.complete())
        except Exception:  # never lose the other runs (or this one's summary) to one bug
            self._metrics.inc("internal_errors_total")
            _log.exception("could not complete run %s", run_id)
            buffer.integrity_error, out = True, []
        for trace in buffer.traces:
            trace_runs = self._trace_runs.get(trace)
            if trace_runs is not None:
                trace_runs.discard(run_id)
                if not trace_runs:
                    del self._trace_runs[trace]
        self._completed.put(run_id, self._clock())
        self._metrics.set_gauge("runs_open", len(self.runs))
        self._metrics.inc("runs_completed_total")
        if buffer.tool_calls_seen:
            out.append(self._summary(buffer))
        return out

    def _summary(self, buffer: RunBuffer) -> Span:
        outcome, score = buffer.score()
        calls = [c for c in (buffer.first_call, buffer.last_call) if c is not None]
        where = place(calls, buffer.root_id, time.time_ns()) or Placement(
            bytes.fromhex(buffer.first_trace or "0" * 32), b"", time.time_ns(), time.time_ns()
        )
        extra = {"loopguard.run.outcome": outcome, "loopguard.run.clock_skew": buffer.clock_skew}
        _log.info("run %s complete: %s, %d tool calls", buffer.run_id, outcome, buffer.tool_calls_seen)
        return run_span(buffer.run_id, where, score, extra)

    def _emit(self, buffer: RunBuffer, found: list[Finding]) -> list[Span]:
        spans: list[Span] = []
        for f in found:
            calls = [c for c in (buffer.recent.get(s) for s in f.seqs) if c]
            self._metrics.inc("findings_total", kind=f.kind, tool=f.tool or "")
            _log.info(
                "finding %s/%s tool=%s run=%s seq=%d-%d: %s",
                f.kind, f.severity, f.tool or "-", f.run_id, f.first_seq, f.last_seq, f.reason,
            )
            where = place(calls, buffer.root_id, time.time_ns())
            if where is None and buffer.first_trace:
                now = time.time_ns()
                where = Placement(bytes.fromhex(buffer.first_trace), bytes.fromhex(buffer.root_id or ""), now, now)
            if where is not None:
                spans.append(finding_span(f, calls, where))
        return spans

