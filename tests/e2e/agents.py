"""The scripted agent both end-to-end backends are fed: real SDK, real OTLP exporter, the
processor installed, a root span per run with a chat span and a `lookup_order` tool span per
turn (GenAI conventions)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

TOOL = "lookup_order"


@dataclass
class AgentRun:
    trace_id: str
    root_id: str
    chat_ids: list[str] = field(default_factory=list)
    tool_ids: list[str] = field(default_factory=list)

    @property
    def app_ids(self) -> list[str]:
        return [self.root_id, *self.chat_ids, *self.tool_ids]


def span_hex(span: Any) -> str:
    return format(span.get_span_context().span_id, "016x")


def run_agents(receiver_port: int, runs: tuple[list[dict[str, Any]], ...], *, key: str,
               resource: Mapping[str, str]) -> list[AgentRun]:
    """One trace per list of arguments: lookup_order called with each, in turn, observe-only."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    import otel_loopguard

    provider = TracerProvider(resource=Resource.create(dict(resource)))
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{receiver_port}", insecure=True, timeout=10)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
    handle = otel_loopguard.install(tracer_provider=provider, key=key)
    assert handle.mode == "observe"
    tracer = provider.get_tracer("loopguard-e2e")
    out: list[AgentRun] = []
    try:
        for calls in runs:
            out.append(_agent(tracer, calls))
        assert provider.force_flush(15_000), "the SDK could not flush its spans to the receiver"
    finally:
        provider.shutdown()
    return out


def _agent(tracer: Any, calls: list[dict[str, Any]]) -> AgentRun:
    with tracer.start_as_current_span("invoke_agent support") as root:
        run = AgentRun(format(root.get_span_context().trace_id, "032x"), span_hex(root))
        for turn, arguments in enumerate(calls, start=1):
            with tracer.start_as_current_span("chat scripted-model") as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
                chat.set_attribute("gen_ai.usage.input_tokens", 900 + 150 * turn)
                chat.set_attribute("gen_ai.usage.output_tokens", 40)
                run.chat_ids.append(span_hex(chat))
            marked = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL}
            with tracer.start_as_current_span(f"execute_tool {TOOL}", attributes=marked) as span:
                span.set_attribute("gen_ai.tool.call.id", f"call_{turn}")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
                span.set_attribute("gen_ai.tool.call.result", json.dumps({"status": "delivered", **arguments}))
                run.tool_ids.append(span_hex(span))
    return run
