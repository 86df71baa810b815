"""The span processor: tags tool spans off the application's thread, then hands them on.

It wraps the processors the application already has (the batch processor with
its exporter, say) and passes each finished span on to all of them. Tool and
model spans go through a bounded queue to one worker thread that fingerprints,
judges and tags them; every other span is passed on at once. The application's
thread does a few dict lookups per span and never waits: when the queue is
full the span is passed on untagged and counted.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Optional, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .tagger import Tagger, interesting

_log = logging.getLogger("otel_loopguard.processor")


class _Flush:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()


class LoopguardSpanProcessor(SpanProcessor):
    def __init__(self, delegates: Sequence[SpanProcessor], tagger: Tagger, queue_size: int = 10_000):
        self._delegates: list[SpanProcessor] = list(delegates)
        # The SDK's private pre-end hook, looked up once rather than per span.
        self._endings = [h for h in (getattr(d, "_on_ending", None) for d in self._delegates) if h is not None]
        self._tagger = tagger
        self._queue: "queue.Queue[object]" = queue.Queue(maxsize=queue_size)
        self.passed_untagged = 0  # spans handed on untagged because the queue was full
        self._errors_logged = 0
        self._stopped = False
        self._worker = threading.Thread(target=self._work, name="otel-loopguard", daemon=True)
        self._worker.start()

    def add_delegate(self, processor: SpanProcessor) -> None:
        self._delegates = [*self._delegates, processor]
        self._endings = [h for h in (getattr(d, "_on_ending", None) for d in self._delegates) if h is not None]

    # -- the application's thread ----------------------------------------------------
    def on_start(self, span: Span, parent_context: Optional[Context] = None) -> None:
        try:
            self._tagger.reserve(span)  # dispatch order, for spans marked as tools at start
        except Exception:
            self._log_error("numbering a span")
        for delegate in self._delegates:
            try:
                delegate.on_start(span, parent_context=parent_context)
            except Exception:  # the SDK would let it reach the application
                self._log_error("starting a span in a wrapped processor")

    def _on_ending(self, span: Span) -> None:
        for hook in self._endings:
            try:
                hook(span)
            except Exception:
                self._log_error("ending a span in a wrapped processor")

    def on_end(self, span: ReadableSpan) -> None:
        try:
            if not self._stopped and interesting(span):
                self._queue.put_nowait(span)
                return
        except queue.Full:
            self.passed_untagged += 1
            span = self._tagger.untagged(span)  # still redacted when redaction is on
        except Exception:  # never into the application: the span goes on untagged
            self._log_error("checking a span")
        self._hand_on(span)

    # -- the worker thread --------------------------------------------------------------
    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, _Flush):
                item.done.set()
                continue
            try:
                tagged = self._tagger.tag(item)  # type: ignore[arg-type]
            except Exception:
                self._log_error("tagging a span")
                tagged = self._tagger.untagged(item)  # type: ignore[arg-type]
            self._hand_on(tagged)  # type: ignore[arg-type]

    def _hand_on(self, span: ReadableSpan) -> None:
        for delegate in self._delegates:
            try:
                delegate.on_end(span)
            except Exception:
                self._log_error("handing a span on")

    def _log_error(self, doing: str) -> None:
        # Logged with a traceback a few times, then counted silently: a broken span
        # must not flood the application's logs.
        self._errors_logged += 1
        if self._errors_logged <= 5:
            _log.exception("otel-loopguard: error while %s; the span is passed on untagged", doing)

    # -- lifecycle ------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        if not self._drain(timeout_millis / 1000):
            return False
        ok = True
        for delegate in self._delegates:
            remaining = max(0, int((deadline - time.monotonic()) * 1000))
            ok = delegate.force_flush(remaining) and ok
        return ok

    def _drain(self, timeout: float) -> bool:
        if not self._worker.is_alive():
            return True
        marker = _Flush()
        try:
            self._queue.put(marker, timeout=timeout)
        except queue.Full:
            return False
        return marker.done.wait(timeout)

    def shutdown(self) -> None:
        if self._stopped:
            return
        self._drain(30.0)
        self._stopped = True
        self._queue.put(_STOP)
        self._worker.join(30.0)
        for delegate in self._delegates:
            delegate.shutdown()
