"""`audit --run-id-attribute` groups spans into runs the way `serve --run-id-attribute` does."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.audit import audit


def _two_traces_one_conversation(path: Path) -> Path:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for _ in range(2):  # two user turns: two traces of one conversation
        with tracer.start_as_current_span("invoke_agent"):
            for _ in range(3):
                with tracer.start_as_current_span("execute_tool lookup") as span:
                    span.set_attribute("gen_ai.operation.name", "execute_tool")
                    span.set_attribute("gen_ai.tool.name", "lookup")
                    span.set_attribute("gen_ai.conversation.id", "conv-1")
                    span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"id": "A12"}))
                    span.set_attribute("gen_ai.tool.call.result", json.dumps({"status": "delivered"}))
    out = path / "spans.pb"
    out.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    return out


def test_runs_follow_the_attribute_when_asked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", "audit-run-attribute-key-0123")
    spans = _two_traces_one_conversation(tmp_path)
    by_trace = audit([spans])
    assert len(by_trace) == 2
    assert all(f.severity != "stop" for r in by_trace for f in r.findings)
    by_conversation = audit([spans], run_id_attribute="gen_ai.conversation.id")
    assert [r.run_id for r in by_conversation] == ["conv-1"]
    assert ("repeat", "stop", 1, 5) in [(f.kind, f.severity, f.first_seq, f.last_seq) for f in by_conversation[0].findings]
