"""A guarded app's spans through the real receiver: the summary's guard fields come from
the denial event (the denied call has no span of its own)."""

from __future__ import annotations

import json
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_loopguard
from otel_loopguard.enforce import make_guard

from .harness import ReceiverThread, Sink, attr, make_config, wait_for

KEY = "guard-receiver-key-0123456789"


def test_the_receiver_scores_the_guard_from_the_denial_event(sink: Sink, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    receiver = ReceiverThread(make_config(sink.port))
    try:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{receiver.port}", insecure=True)))
        otel_loopguard.install(tracer_provider=provider)
        tracer = provider.get_tracer("app")
        guard, invoked = make_guard(), []

        @guard.tool
        def lookup_order(order_id: str) -> dict:
            invoked.append(order_id)
            result = {"status": "delivered", "version": 7}
            with tracer.start_as_current_span("execute_tool lookup_order", attributes={"gen_ai.operation.name": "execute_tool"}) as span:
                span.set_attribute("gen_ai.tool.name", "lookup_order")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": order_id}))
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            return result

        with tracer.start_as_current_span("invoke_agent"):
            for _ in range(5):
                lookup_order("A12")
            otel_loopguard.record_termination("loop_guard")
        provider.shutdown()
        summary = wait_for(lambda: sink.runs(), what="run summary")[0]
        assert len(invoked) == 4
        assert attr(summary, "loopguard.score.guard_fired") is True
        assert attr(summary, "loopguard.score.guard_before_dispatch") is True
        assert attr(summary, "loopguard.score.guard_seq") == 5
        assert attr(summary, "loopguard.score.executed_after_guard") is False
        assert attr(summary, "loopguard.score.termination_reason") == "loop_guard"
        assert attr(summary, "loopguard.score.release.passed") is True
    finally:
        receiver.stop()
