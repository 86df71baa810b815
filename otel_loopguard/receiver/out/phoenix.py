"""Opt-in: each stop finding also recorded as a Phoenix trace annotation.

Phoenix takes a trace's status from its root span only, and the receiver never rewrites a
span it forwarded, so Phoenix's traces list cannot tell from the finding spans alone which
traces looped. With `annotate_phoenix_url` set, every stop finding delivered downstream is
also sent to Phoenix's REST API (`POST /v1/trace_annotations`) as a trace annotation named
`loopguard` (label `stop`, explanation: the reason), which the traces list shows and filters on.

Off by default. Finding spans are rare, so this costs nothing per forwarded span. Annotations
wait in a bounded queue and go in batches from a worker thread (urllib: no new dependency);
a failure is logged and counted, never retried past the batch, and never shows the API key.
Phoenix itself keeps an annotation whose trace it has not stored yet and retries it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from typing import Any, Optional, Sequence

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ...otlp.values import attributes
from .downstream import cancel, take_batch
from ..ops.metrics import Metrics

_log = logging.getLogger("otel_loopguard.receiver")
ANNOTATION_NAME = "loopguard"
ROUTE = "/v1/trace_annotations"
_METADATA = ("loopguard.finding.kind", "loopguard.finding.first_seq", "loopguard.finding.last_seq",
             "loopguard.tool.name", "loopguard.run.id", "loopguard.policy.version")


def annotation(span: Span) -> Optional[dict[str, Any]]:
    """The trace annotation for a stop finding span; None for any other span."""
    if span.status.code != Status.STATUS_CODE_ERROR:
        return None
    attrs = attributes(span.attributes)
    kind = attrs.get("loopguard.finding.kind")
    if not isinstance(kind, str):
        return None  # a run summary that fails the release rule: its findings say why
    first, last = attrs.get("loopguard.finding.first_seq"), attrs.get("loopguard.finding.last_seq")
    meta = {k.removeprefix("loopguard."): attrs[k] for k in _METADATA if k in attrs}
    meta["finding.span_id"] = span.span_id.hex()
    return {
        "name": ANNOTATION_NAME,
        "annotator_kind": "CODE",
        "trace_id": span.trace_id.hex(),
        # One annotation per episode: a re-delivered finding updates it instead of adding one.
        "identifier": f"{kind}/{first}-{last}",
        "result": {"label": "stop", "explanation": attrs.get("loopguard.finding.reason", "")},
        "metadata": meta,
    }


class PhoenixAnnotator:
    def __init__(self, url: str, api_key: Optional[str], metrics: Metrics, *, capacity: int = 10_000,
                 batch: int = 100, timeout: float = 5.0):
        self._url = url.rstrip("/") + ROUTE
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"  # Phoenix's API keys
        self._metrics = metrics
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._capacity, self._batch, self._timeout = capacity, batch, timeout
        self._task: Optional[asyncio.Task[None]] = None
        # No proxy: Phoenix is usually beside the receiver, and a proxy must not see the key.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def offer(self, spans: Sequence[Span]) -> None:
        """Delivered finding spans: annotate the stops among them."""
        for span in spans:
            body = annotation(span)
            if body is None:
                continue
            if self._queue.qsize() >= self._capacity:
                self._metrics.inc("phoenix_annotations_dropped_total")
                continue
            self._queue.put_nowait(body)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="loopguard-phoenix-annotations")

    async def _run(self) -> None:
        while True:
            batch = await take_batch(self._queue, self._batch)
            try:
                sent = await asyncio.to_thread(self._post, batch)
                self._metrics.inc("phoenix_annotations_total" if sent else "phoenix_annotations_dropped_total", len(batch))
            finally:
                for _ in batch:
                    self._queue.task_done()

    def _post(self, batch: list[dict[str, Any]]) -> bool:
        data = json.dumps({"data": batch}).encode()
        request = urllib.request.Request(self._url, data=data, headers=self._headers, method="POST")
        try:
            with self._opener.open(request, timeout=self._timeout) as reply:
                return 200 <= reply.status < 300
        except urllib.error.HTTPError as exc:  # the status and Phoenix's words; never our headers
            _log.error("Phoenix refused %d trace annotations: HTTP %d %s", len(batch), exc.code, exc.reason)
        except (OSError, ValueError) as exc:
            _log.error("cannot send %d trace annotations to Phoenix at %s: %s", len(batch), self._url,
                       getattr(exc, "reason", None) or type(exc).__name__)
        return False

    async def drain(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except asyncio.TimeoutError:
            _log.error("shutdown: %d Phoenix trace annotations not sent", self._queue.qsize())

    async def stop(self) -> None:
        await cancel(self._task)
