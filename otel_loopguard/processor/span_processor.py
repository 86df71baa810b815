"""The span processor: tags tool spans off the application's thread, then hands them on.

It wraps the processors the application already has (the batch processor with
its exporter, say) and passes each finished span on to all of them. Tool and
model spans go through a bounded queue to one worker thread that fingerprints,
judges and tags them; every other span is passed on at once. The application's
thread does a few dict lookups per span and never waits: when the queue is
full the span is passed on untagged and counted.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Optional, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .sdk_shape import attributes_of, on_ending
from .open_models import INFERENCE_NAME_PREFIXES
from .tagger import MARKER_KEYS, Tagger

_log = logging.getLogger("otel_loopguard.processor")


class _Flush:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class _Plain:
    """A span that needs no tagging, queued behind tool spans still being tagged."""

    __slots__ = ("span",)

    def __init__(self, span: ReadableSpan) -> None:
        self.span = span


_STOP = object()
# How long the worker lets tool spans gather before tagging them, unless a flush, a
# shutdown or a half-full queue calls it sooner. Tagging is CPU work under the GIL: done
# in batches it costs less per span (one wake-up, warm caches) and it mostly runs once
# the application thread is idle instead of taking the GIL from it span by span. Export
# is batched downstream anyway (BatchSpanProcessor waits 5 s by default).
BATCH_DELAY_SECONDS = 0.2


class LoopguardSpanProcessor(SpanProcessor):
    def __init__(self, delegates: Sequence[SpanProcessor], tagger: Tagger, queue_size: int = 10_000):
        self._tagger = tagger
        self._marks = tagger.root_marks  # None: roots are handed on as they are
        self._start_keys = tagger.start_keys
        self._reserve = tagger.reserve
        self._open = tagger.open_models
        # Hooks are looked up on each span, as the SDK's own multi-processor does: a
        # processor patched after install (tests, instrumentation) must still be honoured.
        self._delegates: list[SpanProcessor] = list(delegates)
        # Tool and model spans waiting for the worker. A deque rather than queue.Queue:
        # append and popleft are atomic and take no lock, and the worker is woken only
        # when it sleeps (see _wake_if_idle), not once per span.
        self._queue_size = queue_size
        self._high_water = max(1, queue_size // 2)
        self.passed_untagged = 0  # spans handed on untagged because the queue was full
        self._errors_logged = 0
        self._stopped = False
        self._shutdown_hooks: list[Callable[[], None]] = []
        self._start_worker()
        if hasattr(os, "register_at_fork"):
            # A forked child has no worker thread: give it one, as the SDK's batch processor
            # does (weakly: the hook must not keep a discarded processor alive).
            reinit = weakref.WeakMethod(self._at_fork_reinit)
            os.register_at_fork(after_in_child=lambda: (m := reinit()) is not None and m())

    def _start_worker(self) -> None:
        self._pending: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._control = threading.RLock()  # flush and stop bookkeeping only, never per span
        self._asleep = False  # the worker waits for a first span: wake it
        self._busy = False  # the worker is handing spans on: a plain span must queue behind them
        self._gathering = False  # the worker lets a batch gather: wake it at the high-water mark
        self._urgent = False  # a flush or a shutdown waits
        self._worker = threading.Thread(target=self._work, name="otel-loopguard", daemon=True)
        self._worker.start()

    def _at_fork_reinit(self) -> None:
        """In a forked child: the parent's queued spans are the parent's to hand on."""
        self._tagger.at_fork_reinit()
        if not self._stopped:
            self._start_worker()

    def on_shutdown(self, hook: Callable[[], None]) -> None:
        """Called once when this processor shuts down (install() forgets its mode then)."""
        self._shutdown_hooks.append(hook)

    @property
    def delegates(self) -> tuple[SpanProcessor, ...]:
        """The processors tagged spans are handed on to (the exporters' processors)."""
        return tuple(self._delegates)

    def add_delegate(self, processor: SpanProcessor) -> None:
        self._delegates = [*self._delegates, processor]  # a new list: hooks iterating the old one go on

    # -- the application's thread ----------------------------------------------------
    def on_start(self, span: Span, parent_context: Optional[Context] = None) -> None:
        try:
            plain = attributes_of(span)
            keys = self._start_keys
            # Only a span marked as a tool at start is numbered now (dispatch order); one
            # C-level set test settles every other span (none for a span that starts with no
            # attributes), and one name test whether it is an inference span that may end
            # after the calls it asks for.
            if keys is None or (plain and not plain.keys().isdisjoint(keys)):
                self._reserve(span)
            if span.name.startswith(INFERENCE_NAME_PREFIXES):  # may end after the calls it asks for
                self._open.started(span)
        except Exception:
            self._log_error("numbering a span")
        for delegate in self._delegates:
            try:
                delegate.on_start(span, parent_context=parent_context)
            except Exception:  # the SDK would let it reach the application
                self._log_error("starting a span in a wrapped processor", "the other processors still see it")

    def _on_ending(self, span: Span) -> None:
        for delegate in self._delegates:
            try:
                on_ending(delegate, span)
            except Exception:
                self._log_error("ending a span in a wrapped processor", "the other processors still see it")

    def on_end(self, span: ReadableSpan) -> None:
        try:
            if attributes_of(span).keys().isdisjoint(MARKER_KEYS):  # neither a tool nor a model span
                if self._open.count:  # no model span by its attributes: it encloses no call
                    self._open.ended(span)
                if (self._pending or self._busy) and self._queue(_Plain(span)):
                    # Tool spans that ended before this one are still being tagged: this one waits
                    # behind them, so exporters see spans in the order they ended (a root before
                    # its tool calls would make a receiver judge the run before they arrive).
                    return
                if self._marks is not None and self._marks.waiting:
                    span = self._marked(span)  # every tool span before it is tagged: its verdict is known
            elif self._queue(span):
                return  # the worker closes it (open_models.py), in end order
            else:
                self.passed_untagged += 1
                if self._open.count:
                    self._open.ended(span)
                span = self._tagger.untagged(span)  # still redacted when redaction is on
        except Exception:  # never into the application: the span goes on untagged (and redacted)
            self._log_error("checking a span")
            span = self._untagged(span)
        for delegate in self._delegates:  # inline rather than _hand_on: one Python call fewer per span
            try:
                delegate.on_end(span)
            except Exception:
                self._log_error("handing a span on")

    def _queue(self, item: Any) -> bool:
        """Append for the worker; False when the queue is full or shutting down."""
        pending = self._pending
        if self._stopped or len(pending) >= self._queue_size:  # threads may overshoot by one each
            return False
        pending.append(item)
        if self._asleep or (self._gathering and len(pending) >= self._high_water):
            self._wake.set()
        if self._stopped:  # shutdown began meanwhile: its worker may be gone
            self._reclaim(item)
        return True

    # -- the worker thread --------------------------------------------------------------
    def _work(self) -> None:
        pending = self._pending
        wake = self._wake
        while True:
            # No lost wake-up: the app appends, then reads the flag; here the flag is
            # set, then the deque read. One of the two sees the other's write.
            wake.clear()
            self._asleep = True
            if not pending:
                wake.wait()
            self._asleep = False
            wake.clear()
            self._gathering = True
            if not self._urgent and len(pending) < self._high_water:
                wake.wait(BATCH_DELAY_SECONDS)
            self._gathering = False
            self._urgent = False
            self._busy = True  # spans taken from the queue but not handed on yet
            while pending:
                item = pending.popleft()
                if item is _STOP:
                    return
                if isinstance(item, _Flush):
                    item.done.set()
                    continue
                if isinstance(item, _Plain):
                    self._hand_on(self._marked(item.span))
                    continue
                try:
                    tagged = self._tagger.tag(item)
                except Exception:
                    self._log_error("tagging a span")
                    tagged = self._untagged(item)
                self._hand_on(tagged)
            self._busy = False

    def _enqueue(self, item: object) -> None:
        """A control item for the worker (flush, stop): never refused, handled at once."""
        self._pending.append(item)
        self._urgent = True
        self._wake.set()

    def _marked(self, span: ReadableSpan) -> ReadableSpan:
        """A span that needs no tagging, marked when it is a stopped run's root; never raises."""
        try:
            return self._tagger.mark_root(span)
        except Exception:
            self._log_error("marking a root span", "it is passed on unmarked")
            return span

    def _untagged(self, span: ReadableSpan) -> ReadableSpan:
        """The span without tags, redacted when redaction is on; never raises (the worker
        and the application's thread both call it from their error paths)."""
        try:
            return self._tagger.untagged(span)
        except Exception:
            self._log_error("redacting a span")
            return span

    def _reclaim(self, item: Any) -> None:
        """A span queued while shutting down: hand it on here unless the worker took it."""
        with self._control:
            try:
                self._pending.remove(item)
            except ValueError:
                return  # the worker (or the shutdown's sweep) has it
        self._hand_on(self._marked(item.span) if isinstance(item, _Plain) else self._untagged(item))

    def _hand_on(self, span: ReadableSpan) -> None:
        for delegate in self._delegates:
            try:
                delegate.on_end(span)
            except Exception:
                self._log_error("handing a span on")

    def _log_error(self, doing: str, then: str = "the span is passed on untagged") -> None:
        # Logged with a traceback a few times, then counted silently: a broken span
        # must not flood the application's logs.
        self._errors_logged += 1
        if self._errors_logged <= 5:
            _log.exception("otel-loopguard: error while %s; %s", doing, then)

    # -- lifecycle ------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        if not self._drain(timeout_millis / 1000):
            return False
        ok = True
        for delegate in self._delegates:
            remaining = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                ok = bool(delegate.force_flush(remaining)) and ok
            except Exception:  # the SDK would let it reach the application; always logged (rare)
                _log.exception("otel-loopguard: a wrapped processor failed to flush; the others are flushed")
                ok = False
        return ok

    def _drain(self, timeout: float) -> bool:
        if not self._worker.is_alive():
            self._sweep()
            return True
        with self._control:
            # Consecutive flushes with no span queued in between share one marker: flushes
            # that time out while a wrapped processor hangs must not pile up in the queue.
            last = self._pending[-1] if self._pending else None
            marker = last if isinstance(last, _Flush) else _Flush()
            if marker is not last:
                self._enqueue(marker)
        return marker.done.wait(timeout)

    def _sweep(self) -> None:
        """Hand on, untagged, whatever no worker will take (a stopped or dead worker)."""
        with self._control:
            while True:
                try:
                    item = self._pending.popleft()
                except IndexError:
                    return
                if isinstance(item, _Flush):
                    item.done.set()
                elif isinstance(item, _Plain):
                    self._hand_on(self._marked(item.span))
                elif item is not _STOP:
                    self._hand_on(self._untagged(item))

    @property
    def stopped(self) -> bool:
        return self._stopped

    def shutdown(self) -> None:
        """The provider's shutdown: stop tagging, then shut the wrapped processors down."""
        if not self._stop_tagging():
            return
        for delegate in self._delegates:
            try:
                delegate.shutdown()
            except Exception:  # one failing must not leave the others (and their exporters) open
                _log.exception("otel-loopguard: a wrapped processor failed to shut down; the others are shut down")

    def detach(self) -> None:
        """Stop tagging and flush the wrapped processors, leaving them running: the handle's
        shutdown gives them back to the provider (install.py), which goes on exporting."""
        if not self._stop_tagging():
            return
        for delegate in self._delegates:
            try:
                delegate.force_flush()
            except Exception:  # never into the application
                _log.exception("otel-loopguard: a wrapped processor failed to flush; the others are flushed")

    def _stop_tagging(self) -> bool:
        """Tag and hand on what is queued, stop the worker; False when already stopped."""
        if self._stopped:
            return False
        self._drain(30.0)
        self._stopped = True
        for hook in self._shutdown_hooks:
            try:
                hook()
            except Exception:  # never into the application
                _log.exception("otel-loopguard: a shutdown hook failed")
        self._enqueue(_STOP)
        self._worker.join(30.0)
        self._sweep()  # spans that ended while stopping
        return True
