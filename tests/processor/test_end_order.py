"""Spans leave the processor in the order they ended, tool spans (tagged off-thread) included.

The processor tags tool spans on its worker thread, in batches that gather for a moment;
a root span that ended after its tool calls must not overtake them on the way to the
exporter. If it did, a batch exporter could send the root in one request and the tool spans
seconds later in the next, and a receiver completes a run a grace period after its root
ended: it judged such runs on their first calls and missed the loop (seen as about one run
in a hundred behind the SDK's default batch processor).
"""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from otel_loopguard.processor import install

from .helpers import KEY


class Recorder(SpanProcessor):
    """The order in which spans reach the application's own processors."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.names.append(span.name)


def _agent(provider: TracerProvider, calls: int) -> None:
    tracer = provider.get_tracer("order-test")
    with tracer.start_as_current_span("invoke_agent support"):
        for i in range(calls):
            with tracer.start_as_current_span("execute_tool lookup_order",
                                              attributes={"gen_ai.operation.name": "execute_tool",
                                                          "gen_ai.tool.name": "lookup_order"}) as span:
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": f"A{i}"}))
            with tracer.start_as_current_span("chain step"):  # a plain span between tool calls
                pass


def test_a_root_never_overtakes_its_tool_spans() -> None:
    recorder = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(recorder)
    handle = install(tracer_provider=provider, key=KEY)
    _agent(provider, calls=3)
    assert provider.force_flush(10_000)
    assert recorder.names == ["execute_tool lookup_order", "chain step"] * 3 + ["invoke_agent support"]
    handle.shutdown()


def test_a_plain_span_with_no_tool_span_pending_is_handed_on_at_once() -> None:
    """The negative control: no tool span waiting, nothing to keep the order of: no detour."""
    recorder = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(recorder)
    handle = install(tracer_provider=provider, key=KEY)
    with provider.get_tracer("order-test").start_as_current_span("GET /health"):
        pass
    assert recorder.names == ["GET /health"]  # before any flush: on the application's thread
    handle.shutdown()
