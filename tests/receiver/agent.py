"""A scripted looping agent traced with the real SDK and exported with the real OTLP exporter."""

from __future__ import annotations

import json
from typing import Any, Optional

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode


def provider(port: int, *, batch: bool = False, extra: Optional[SpanProcessor] = None) -> TracerProvider:
    tp = TracerProvider(resource=Resource.create({"service.name": "scripted-agent"}))
    if extra is not None:
        tp.add_span_processor(extra)
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=10)
    tp.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50) if batch else SimpleSpanProcessor(exporter))
    return tp


def run_agent(tp: TracerProvider, calls: list[tuple[str, dict[str, Any], Any]], *, fail: frozenset[int] = frozenset()) -> str:
    """One trace: agent root -> per turn a chat span, then the tool span (GenAI conventions)."""
    tracer = tp.get_tracer("scripted-agent")
    with tracer.start_as_current_span("invoke_agent support") as root:
        for i, (tool, args, result) in enumerate(calls, start=1):
            with tracer.start_as_current_span("chat scripted") as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
                chat.set_attribute("gen_ai.usage.input_tokens", 1000 * i)
                chat.set_attribute("gen_ai.usage.output_tokens", 20)
            with tracer.start_as_current_span(f"execute_tool {tool}") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", tool)
                span.set_attribute("gen_ai.tool.call.id", f"call_{i}")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
                if i in fail:
                    span.set_status(Status(StatusCode.ERROR, "tool failed"))
        return format(root.get_span_context().trace_id, "032x")


LOOP = [("lookup_order", {"order_id": "A12"}, {"status": "delivered", "version": 7})] * 6


def record_spans(calls: list[tuple[str, dict[str, Any], Any]], *, fail: frozenset[int] = frozenset()) -> tuple[str, list[Any]]:
    """Run the scripted agent once with the real SDK; keep the finished spans in memory.

    Returns (trace id hex, spans in the order the SDK finished them).
    """
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "scripted-agent"}))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    trace_id = run_agent(tp, calls, fail=fail)
    tp.shutdown()
    return trace_id, list(exporter.get_finished_spans())


def encode(spans: Any) -> Any:
    """SDK spans -> ExportTraceServiceRequest, exactly as the real OTLP exporter encodes them."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(list(spans))


# A healthy agent: every call asks something new and learns something new.
HEALTHY = [("lookup_order", {"order_id": f"A{i}"}, {"status": "delivered", "order_id": f"A{i}", "version": i}) for i in range(1, 7)]
