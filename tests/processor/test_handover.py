"""The cheap paths of the span processor: hook binding, the marker test, the batching worker."""

from __future__ import annotations

import collections
import gc
import os
import threading
import time
import warnings
from typing import Any, Callable

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.processor import span_processor as sp
from otel_loopguard.processor.sdk_shape import attributes_of
from otel_loopguard.processor.tagger import MARKERS, interesting

from .helpers import Stack, captured, emit, tags


class Counting(SpanProcessor):
    def __init__(self) -> None:
        self.started = self.ending = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started += 1

    def _on_ending(self, span: Any) -> None:
        self.ending += 1


def test_a_wrapped_processor_patched_after_install_is_honoured(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks are looked up per span, as the SDK does: patches made after install() count."""
    seen: list[str] = []
    monkeypatch.setattr(SimpleSpanProcessor, "on_start", lambda self, span, parent_context=None: seen.append("start"))
    real_end = SimpleSpanProcessor.on_end
    monkeypatch.setattr(SimpleSpanProcessor, "on_end", lambda self, span: (seen.append("end"), real_end(self, span)))
    emit(stack.tracer, {"name": "plain"}, attributes={"http.method": "GET"})
    emit(stack.tracer, captured("genai_tool"))
    assert len(stack.spans()) == 2
    assert seen.count("start") == 2 and seen.count("end") == 2


class Blocking(SpanProcessor):
    """A wrapped processor that hangs in on_end until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def on_end(self, span: Any) -> None:
        self.release.wait(10)


def test_flushes_that_time_out_do_not_pile_up_in_the_queue(stacks: Callable[..., Stack]) -> None:
    stack = stacks()
    blocking = Blocking()
    stack.tp.add_span_processor(blocking)
    processor = stack.handle.processor
    try:
        emit(stack.tracer, captured("genai_tool"))
        processor.force_flush(50)  # the worker is now stuck in Blocking.on_end
        for _ in range(200):
            assert not processor.force_flush(1)
        assert len(processor._pending) <= 1  # one shared marker, not 200
        emit(stack.tracer, captured("genai_tool"))  # still queued for tagging, not passed on untagged
        assert processor.passed_untagged == 0
    finally:
        blocking.release.set()
    assert len(stack.tagged()) == 2


def test_a_span_that_ends_while_shutdown_stops_the_worker_is_still_handed_on(stack: Stack) -> None:
    """The race: on_end passed its "not stopped" check, then shutdown stopped the worker and
    swept the queue, and only then was the span queued. Played deterministically: the worker
    is stopped first, and "shutdown" completes inside the append."""
    processor = stack.handle.processor
    processor._enqueue(sp._STOP)
    processor._worker.join(5)
    assert not processor._worker.is_alive()

    class ShutdownDuringAppend(collections.deque):  # type: ignore[type-arg]
        def append(self, item: Any) -> None:
            super().append(item)
            processor._stopped = True  # shutdown's sweep already ran: nobody else will take it

    processor._pending = ShutdownDuringAppend()
    emit(stack.tracer, captured("genai_tool"))
    assert [s.name for s in stack.exporter.get_finished_spans()] == [captured("genai_tool")["name"]]
    assert not processor._pending


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_tags_and_exports_its_own_tool_spans(stack: Stack) -> None:
    emit(stack.tracer, captured("genai_tool"))
    assert len(stack.tagged()) == 1
    # Each live TracerProvider runs a fork hook in the child that starts a thread pool
    # (opentelemetry-sdk's TracerProvider._after_in_child): with the providers of earlier tests
    # still around, one such start once hung the child. Providers already dropped go first.
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: what the hook is for
        pid = os.fork()
    if pid == 0:  # the child: a fresh worker must tag and hand on
        ok = False
        try:
            emit(stack.tracer, captured("genai_tool"))
            ok = stack.tp.force_flush(5000) and len(stack.tagged()) == 2
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:  # fail, rather than hold the whole suite up
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child did not finish within 60 s (a fork hook of the SDK's providers?)")
    assert os.WEXITSTATUS(done[1]) == 0


def test_hooks_that_do_something_are_called_for_every_span(stacks: Callable[..., Stack]) -> None:
    stack = stacks()
    counting = Counting()
    stack.tp.add_span_processor(counting)  # after install: becomes a delegate
    emit(stack.tracer, {"name": "plain"}, attributes={"http.method": "GET"})
    emit(stack.tracer, captured("genai_tool"))
    assert (counting.started, counting.ending) == (2, 2)
    assert len(stack.spans()) == 2


def test_marker_test_reads_every_kind_of_attribute_mapping(stack: Stack) -> None:
    emit(stack.tracer, captured("genai_tool"))
    tagged = stack.tagged()[0]  # a copy whose attributes are a read-only view, not BoundedAttributes
    assert interesting(tagged)
    assert dict(attributes_of(tagged)) == dict(tagged.attributes or {})
    bare = ReadableSpan("bare", attributes=None)
    assert not interesting(bare) and dict(attributes_of(bare)) == {}
    for marker in MARKERS:
        assert interesting(ReadableSpan("x", attributes={marker: "anything"}))
    assert not interesting(ReadableSpan("x", attributes={"http.method": "GET", "gen_ai.system": "openai"}))


def test_a_tool_span_is_tagged_without_a_flush(stack: Stack) -> None:
    emit(stack.tracer, captured("genai_tool"))
    deadline = time.monotonic() + 10 * sp.BATCH_DELAY_SECONDS + 5
    while not stack.exporter.get_finished_spans() and time.monotonic() < deadline:
        time.sleep(0.01)
    spans = stack.exporter.get_finished_spans()
    assert len(spans) == 1 and tags(spans[0])["loopguard.seq"] == 1


def test_a_half_full_queue_wakes_the_worker_before_the_batch_delay(
    monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack]
) -> None:
    monkeypatch.setattr(sp, "BATCH_DELAY_SECONDS", 60.0)
    monkeypatch.setenv("OTEL_LOOPGUARD_QUEUE_SIZE", "4")
    stack = stacks()
    with stack.tracer.start_as_current_span("agent"):
        for _ in range(2):
            emit(stack.tracer, captured("genai_tool"))

    def tagged() -> int:
        return sum("loopguard.seq" in tags(s) for s in stack.exporter.get_finished_spans())

    deadline = time.monotonic() + 10
    while tagged() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tagged() == 2, "woken at the high-water mark, not after 60 s"


def test_flush_does_not_wait_for_the_batch_delay(monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack]) -> None:
    monkeypatch.setattr(sp, "BATCH_DELAY_SECONDS", 60.0)
    stack = stacks()
    emit(stack.tracer, captured("genai_tool"))
    t0 = time.monotonic()
    assert stack.tp.force_flush(10_000)
    assert time.monotonic() - t0 < 5
    assert tags(stack.exporter.get_finished_spans()[0])["loopguard.seq"] == 1


def test_no_span_is_lost_when_threads_race_the_worker(stacks: Callable[..., Stack]) -> None:
    stack = stacks(batch=True)
    per_thread, threads = 200, 6
    start = threading.Barrier(threads)

    def agent() -> None:
        start.wait()
        with stack.tracer.start_as_current_span("agent"):
            for i in range(per_thread):
                emit(stack.tracer, captured("genai_tool"))
                if i % 50 == 0:
                    time.sleep(sp.BATCH_DELAY_SECONDS / 4)  # let the worker sleep and wake meanwhile

    workers = [threading.Thread(target=agent) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    spans = stack.spans()
    tools = [s for s in spans if s.name != "agent"]
    assert len(tools) == threads * per_thread
    assert all("loopguard.seq" in tags(s) for s in tools)
    assert stack.handle.processor.passed_untagged == 0  # type: ignore[union-attr]


def test_the_field_copy_of_a_tagged_span_equals_the_constructed_one(stack: Stack) -> None:
    from otel_loopguard.processor import sdk_shape

    class Other(ReadableSpan):  # not the SDK's exact type: takes the constructor path
        pass

    with stack.tracer.start_as_current_span("agent"):
        emit(stack.tracer, captured("genai_tool"))
    original = next(s for s in stack.spans() if s.name != "agent")
    tagger = stack.handle.processor._tagger  # type: ignore[union-attr]  # noqa: SLF001
    source = ReadableSpan.__new__(ReadableSpan)
    source.__dict__.update(original.__dict__)
    other = Other.__new__(Other)
    other.__dict__.update(original.__dict__)
    attrs = dict(original.attributes or {})
    fast = tagger._copy(source, dict(attrs), {"loopguard.x": 1}, [])  # noqa: SLF001
    slow = tagger._copy(other, dict(attrs), {"loopguard.x": 1}, [])  # noqa: SLF001
    assert type(fast) is ReadableSpan and type(slow) is ReadableSpan
    assert fast.__dict__.keys() == slow.__dict__.keys()
    assert len(fast.__dict__) == sdk_shape._READABLE_FIELD_COUNT
    assert fast.to_json() == slow.to_json()
    assert dict(fast.attributes or {}) == dict(slow.attributes or {}) and fast.attributes is not original.attributes


class Recording(SpanProcessor):
    """A wrapped processor that keeps what it is handed, even after shutdown."""

    def __init__(self) -> None:
        self.ended: list[Any] = []

    def on_end(self, span: Any) -> None:
        self.ended.append(span)


def test_spans_after_shutdown_or_a_failed_check_are_still_redacted(stacks: Callable[..., Stack]) -> None:
    from otel_loopguard.processor.tagger import RAW_PAYLOAD_KEYS

    stack = stacks(redact=True)
    recording = Recording()
    stack.tp.add_span_processor(recording)
    processor = stack.handle.processor
    processor.shutdown()
    emit(stack.tracer, captured("genai_tool"))  # after shutdown: passed on, never tagged
    # A check that fails on the application's thread: the span goes on untagged, still redacted.
    processor._stopped, pending = False, processor._pending
    processor._pending = None  # len(None) raises inside on_end's check
    try:
        emit(stack.tracer, captured("genai_tool"))
    finally:
        processor._stopped, processor._pending = True, pending
    assert len(recording.ended) == 2
    for span in recording.ended:
        assert not RAW_PAYLOAD_KEYS & set(span.attributes or {})
