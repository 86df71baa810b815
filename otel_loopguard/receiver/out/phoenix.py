"""Findings recorded in Phoenix's own annotations, once its URL is given (`--annotate-phoenix-url`).

Phoenix takes a trace's row in its traces list from the trace's root span, and the receiver
never rewrites a span it forwarded, so the finding spans alone leave the looping trace's row
looking like a healthy one. Phoenix's REST API can annotate what it already stores, so every
warn or stop finding delivered downstream also becomes:

- on its trace (`POST /v1/trace_annotations`) and on the finding's parent, the run's root span
  (`POST /v1/span_annotations`): an annotation named `loopguard` whose label says the verdict,
  kind, tool and count (`stop: repeat lookup_order x5`), with the reason and the finding span's
  id as explanation. The root span's annotation has no score, so Phoenix prints its label (a
  score would stand in its place) in the root span's row of the traces list ("span
  annotations", a default column, though past the right edge of a 1400 px window) and in the
  trace's tree; the trace annotation's score (the offending calls) is what Phoenix charts;
- on each offending tool span (up to the last `MAX_CALL_NOTES`): an annotation naming its place
  in the loop (`repeat 3/5`), and on the call enforce mode would have denied or warned about,
  `would deny: repeat 5/5`.

Only the trace's verdict is annotated (`Verdicts`): one loop reads as one finding there.

Annotations wait in a bounded queue and go in batches from a worker thread (urllib: no new
dependency); a failure is logged and counted, never retried past the batch, and never shows the
API key. Phoenix keeps an annotation whose span or trace it has not stored yet and retries it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from typing import Any, Optional, Sequence

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ...bounded import BoundedMap
from ...otlp.values import attributes
from .downstream import cancel, take_batch
from ..ops.metrics import Metrics

_log = logging.getLogger("otel_loopguard.receiver")
ANNOTATION_NAME = "loopguard"
TRACE_ROUTE, SPAN_ROUTE = "/v1/trace_annotations", "/v1/span_annotations"
MAX_CALL_NOTES = 20  # offending spans annotated per finding: the last ones, the denied call included
TRACES_REMEMBERED = 100_000  # traces whose best finding so far is remembered (bounded.py)
_RANK = {"warn": 1, "stop": 2}
_METADATA = ("loopguard.finding.kind", "loopguard.finding.severity", "loopguard.finding.count",
             "loopguard.finding.first_seq", "loopguard.finding.last_seq", "loopguard.tool.name",
             "loopguard.run.id", "loopguard.policy.version")
Note = tuple[str, dict[str, Any]]  # (route, body)


def label(attrs: dict[str, Any]) -> str:
    """`stop: repeat lookup_order x5`: verdict, kind, tool and count, the key words first."""
    tool = attrs.get("loopguard.tool.name")
    return (f"{attrs['loopguard.finding.severity']}: {attrs['loopguard.finding.kind']}"
            + (f" {tool}" if tool else "") + f" x{attrs.get('loopguard.finding.count', 0)}")


def _finding_attrs(span: Span) -> Optional[dict[str, Any]]:
    """The finding's attributes when it is a warn or a stop; None for any other span."""
    attrs = attributes(span.attributes)
    if not isinstance(attrs.get("loopguard.finding.kind"), str):
        return None  # a run summary or another span: its findings say why
    return attrs if attrs.get("loopguard.finding.severity") in _RANK else None


def _explanation(span: Span, attrs: dict[str, Any]) -> str:
    return f"{attrs.get('loopguard.finding.reason', '')} (finding span {span.span_id.hex()})"


def annotation(span: Span) -> Optional[dict[str, Any]]:
    """The trace annotation for a warn or stop finding span; None for any other span."""
    attrs = _finding_attrs(span)
    if attrs is None:
        return None
    meta = {k.removeprefix("loopguard."): attrs[k] for k in _METADATA if k in attrs}
    meta["finding.span_id"] = span.span_id.hex()
    return {
        "name": ANNOTATION_NAME,
        "annotator_kind": "CODE",
        "trace_id": span.trace_id.hex(),
        "result": {"label": label(attrs), "score": float(attrs.get("loopguard.finding.count", 0)),
                   "explanation": _explanation(span, attrs)},
        "metadata": meta,
    }


def root_annotation(span: Span, trace_note: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The same on the finding's parent (the run's root span when known), label only: a score
    would replace the label in the traces list's cell."""
    if not span.parent_span_id:
        return None
    result = {k: v for k, v in trace_note["result"].items() if k != "score"}
    return {"name": ANNOTATION_NAME, "annotator_kind": "CODE", "span_id": span.parent_span_id.hex(),
            "result": result, "metadata": trace_note["metadata"]}


def call_annotations(span: Span) -> list[dict[str, Any]]:
    """One annotation per offending tool span: its place in the loop; the last call of a stop
    is the one enforce mode would have denied (of a warn, warned about)."""
    attrs = _finding_attrs(span)
    if attrs is None:
        return []
    kind, ids = attrs["loopguard.finding.kind"], [s for s in attrs.get("loopguard.finding.span_ids", ()) if s]
    verdict = "would deny" if attrs["loopguard.finding.severity"] == "stop" else "would warn"
    explanation = _explanation(span, attrs)
    notes = []
    for k, span_id in list(enumerate(ids, start=1))[-MAX_CALL_NOTES:]:
        text = f"{kind} {k}/{len(ids)}"
        notes.append({"name": ANNOTATION_NAME, "annotator_kind": "CODE", "span_id": span_id,
                      "result": {"label": f"{verdict}: {text}" if k == len(ids) else text,
                                 "explanation": explanation},
                      "metadata": {"finding.span_id": span.span_id.hex(), "finding.kind": kind}})
    return notes


class Verdicts:
    """Which finding is the trace's verdict in Phoenix: the first stop, else the first warn.
    Only the verdict is annotated (trace, root span, calls), and each annotation has one per
    span or trace (no identifier), so a stop replaces its warn and a second finding over the
    same calls (`no_progress` beside `repeat`) adds nothing: one loop reads as one finding.
    Bounded: a forgotten trace may get its annotations replaced once more."""

    def __init__(self, limit: int = TRACES_REMEMBERED):
        self._best: BoundedMap[bytes, int] = BoundedMap(limit)

    def notes(self, span: Span) -> list[Note]:
        attrs = _finding_attrs(span)
        trace_note = annotation(span)
        if attrs is None or trace_note is None:
            return []
        rank = _RANK[attrs["loopguard.finding.severity"]]
        if rank <= (self._best.get(span.trace_id) or 0):
            return []
        self._best.put(span.trace_id, rank)
        notes: list[Note] = [(SPAN_ROUTE, n) for n in call_annotations(span)]
        notes.append((TRACE_ROUTE, trace_note))
        root = root_annotation(span, trace_note)
        return notes + ([(SPAN_ROUTE, root)] if root is not None else [])


class PhoenixAnnotator:
    def __init__(self, url: str, api_key: Optional[str], metrics: Metrics, *, capacity: int = 10_000,
                 batch: int = 100, timeout: float = 5.0):
        self._base = url.rstrip("/")
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"  # Phoenix's API keys
        self._metrics = metrics
        self._verdicts = Verdicts()
        self._queue: asyncio.Queue[Note] = asyncio.Queue()
        self._capacity, self._batch, self._timeout = capacity, batch, timeout
        self._task: Optional[asyncio.Task[None]] = None
        # No proxy: Phoenix is usually beside the receiver, and a proxy must not see the key.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def offer(self, spans: Sequence[Span]) -> None:
        """Delivered finding spans: annotate the warns and stops among them."""
        for span in spans:
            for note in self._verdicts.notes(span):
                if self._queue.qsize() >= self._capacity:
                    self._metrics.inc("phoenix_annotations_dropped_total")
                    continue
                self._queue.put_nowait(note)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="loopguard-phoenix-annotations")

    async def _run(self) -> None:
        while True:
            batch = await take_batch(self._queue, self._batch)
            try:
                for route in (SPAN_ROUTE, TRACE_ROUTE):
                    bodies = [body for r, body in batch if r == route]
                    if bodies:
                        sent = await asyncio.to_thread(self._post, route, bodies)
                        self._metrics.inc("phoenix_annotations_total" if sent else "phoenix_annotations_dropped_total",
                                          len(bodies))
            finally:
                for _ in batch:
                    self._queue.task_done()

    def _post(self, route: str, batch: list[dict[str, Any]]) -> bool:
        data = json.dumps({"data": batch}).encode()
        request = urllib.request.Request(self._base + route, data=data, headers=self._headers, method="POST")
        try:
            with self._opener.open(request, timeout=self._timeout) as reply:
                return 200 <= reply.status < 300
        except urllib.error.HTTPError as exc:  # the status and Phoenix's words; never our headers
            _log.error("Phoenix refused %d annotations (%s): HTTP %d %s", len(batch), route, exc.code, exc.reason)
        except (OSError, ValueError) as exc:
            _log.error("cannot send %d annotations to Phoenix at %s: %s", len(batch), self._base + route,
                       getattr(exc, "reason", None) or type(exc).__name__)
        return False

    async def drain(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except asyncio.TimeoutError:
            _log.error("shutdown: %d Phoenix annotations not sent", self._queue.qsize())

    async def stop(self) -> None:
        await cancel(self._task)
