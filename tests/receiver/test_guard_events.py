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


@pytest.mark.parametrize("capped_again", [False, True])
def test_the_receiver_counts_only_the_capped_tool_after_a_cap_denial(
        sink: Sink, monkeypatch: pytest.MonkeyPatch, tmp_path, capped_again: bool) -> None:
    """docs/rollout.md: a cap refuses its tool only. Other tools running after the cap's denial
    (an event: the denied call has no span) are not executed_after_guard; the capped tool is."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: cap-r1\ntools:\n  lookup_order: {max_calls: 2}\n", encoding="utf-8")
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    receiver = ReceiverThread(make_config(sink.port, policy=str(policy)))
    try:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{receiver.port}", insecure=True)))
        otel_loopguard.install(tracer_provider=provider, policy=str(policy))
        tracer = provider.get_tracer("app")
        guard = make_guard(policy=str(policy))

        def traced(tool: str, order_id: str) -> dict:
            result = {"order": order_id, "tool": tool}
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes={"gen_ai.operation.name": "execute_tool"}) as span:
                span.set_attribute("gen_ai.tool.name", tool)
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": order_id}))
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            return result

        @guard.tool
        def lookup_order(order_id: str) -> dict:
            return traced("lookup_order", order_id)

        @guard.tool
        def get_shipping(order_id: str) -> dict:
            return traced("get_shipping", order_id)

        with tracer.start_as_current_span("invoke_agent"):
            lookup_order("A1")
            lookup_order("A2")
            denied = lookup_order("A3")  # the cap: refused, no span
            get_shipping("A1")
            get_shipping("A2")
            if capped_again:  # the guard bypassed: the capped tool runs past its cap
                traced("lookup_order", "A4")
            otel_loopguard.record_termination("final_answer")
        provider.shutdown()
        summary = wait_for(lambda: sink.runs(), what="run summary")[0]
        assert isinstance(denied, str) and denied.startswith("Not executed: loop guard")
        assert attr(summary, "loopguard.score.guard_fired") is True
        assert attr(summary, "loopguard.score.executed_after_guard") is capped_again
        assert attr(summary, "loopguard.score.release.passed") is (not capped_again)
    finally:
        receiver.stop()
