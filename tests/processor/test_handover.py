"""The cheap paths of the span processor: hook binding, the marker test, the batching worker."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.processor import span_processor as sp
from otel_loopguard.processor.tagger import MARKERS, attribute_dict, interesting

from .helpers import Stack, captured, emit, tags


class Counting(SpanProcessor):
    def __init__(self) -> None:
        self.started = self.ending = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started += 1

    def _on_ending(self, span: Any) -> None:
        self.ending += 1


class Documented(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        """Nothing to do at start."""


def test_empty_hooks_are_recognised_and_others_are_not() -> None:
    assert sp._does_nothing(SpanProcessor().on_start)
    assert sp._does_nothing(BatchSpanProcessor(InMemorySpanExporter()).on_start)
    assert sp._does_nothing(SimpleSpanProcessor(InMemorySpanExporter())._on_ending)
    assert sp._does_nothing(Documented().on_start)
    assert not sp._does_nothing(Counting().on_start)
    assert not sp._does_nothing(Counting()._on_ending)
    assert not sp._does_nothing(lambda span: print(span))
    assert not sp._does_nothing(print)  # a builtin: no bytecode to judge, so it is called
    assert not sp._does_nothing(object())


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
    assert dict(attribute_dict(tagged)) == dict(tagged.attributes or {})
    bare = ReadableSpan("bare", attributes=None)
    assert not interesting(bare) and dict(attribute_dict(bare)) == {}
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
    from otel_loopguard.processor import tagger as tagger_module

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
    assert fast.__dict__.keys() == slow.__dict__.keys() == tagger_module._READABLE_FIELDS
    assert fast.to_json() == slow.to_json()
    assert dict(fast.attributes or {}) == dict(slow.attributes or {}) and fast.attributes is not original.attributes
