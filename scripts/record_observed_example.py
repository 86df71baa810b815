"""Record otel_loopguard/examples/observed_agents.otlp.json: scripted agents traced through the
real OpenTelemetry SDK with `otel_loopguard.install(mode="observe")`, exported as OTLP/JSON
(one request a line, as the Collector's file exporter writes them).

    .venv/bin/python scripts/record_observed_example.py [OUT_FILE]

It is the "observe" step of docs/rollout.md: the spans carry the processor's tags and its
`loopguard.decision` events (`would_warn`, `would_block`), which `otel-loopguard calibrate`
reads back (with `--run-id-attribute gen_ai.conversation.id`). Four runs, one trace each:

- support: looks up one order seven times, the same answer every time (a loop);
- search: pages through results (a new cursor and new items each call), then re-runs one
  query four times (warns; a candidate with a lower repeat limit stops it);
- poller: polls an export until it completes, nine polls with changing state (a legitimate
  repeat that the default policy reads as a loop unless the tool gets a progress rule);
- triage: twelve distinct searches (no loop; a per-tool cap would cut it).

Each model decision is a GenAI `chat` span with token counts, so budgets and savings have
tokens to count. A random digest key is used: nothing secret is written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

import otel_loopguard
from otel_loopguard.otlp.json_format import request_to_json

# Each agent's spans carry its conversation id, the run id (audit/calibrate --run-id-attribute).
RUN = "gen_ai.conversation.id"
OUT = Path(__file__).resolve().parents[1] / "otel_loopguard" / "examples" / "observed_agents.otlp.json"


def _turn(tracer: Tracer, run: str, calls: list[tuple[str, dict[str, Any], Any]]) -> None:
    """One model decision and the tool calls it requested."""
    with tracer.start_as_current_span("chat scripted-model", attributes={
            RUN: run, "gen_ai.operation.name": "chat", "gen_ai.request.model": "scripted-model",
            "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 60}):
        pass
    for tool, arguments, result in calls:
        with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                RUN: run, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}) as span:
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))


def _agent(tracer: Tracer, name: str, turns: list[list[tuple[str, dict[str, Any], Any]]]) -> None:
    with tracer.start_as_current_span(f"invoke_agent {name}", attributes={
            RUN: name, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}):
        for calls in turns:
            _turn(tracer, name, calls)


def record(tracer: Tracer) -> None:
    order = ("lookup_order", {"order_id": "A12"}, {"status": "delivered", "eta": None})
    _agent(tracer, "support-A12", [[order]] * 7)
    pages = [[("search_cases", {"query": "refund", "cursor": c}, {"items": [{"id": f"case-{i}"}], "next": f"p{i + 1}"})]
             for i, c in enumerate([None, "p1", "p2"])]
    again = [("search_cases", {"query": "refund status"}, {"items": [], "next": None})]
    _agent(tracer, "refund-search", pages + [again] * 4)
    states = ["queued", "queued", "running", "running", "running", "running", "running", "running", "complete"]
    _agent(tracer, "export-poller", [[("get_export_status", {"export_id": "x9"}, {"state": s})] for s in states])
    _agent(tracer, "triage-topics", [[("search_cases", {"query": f"topic {i}"}, {"items": [{"id": f"t-{i}"}]})]
                              for i in range(12)])


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handle = otel_loopguard.install(mode="observe", run_id_attribute=RUN, tracer_provider=provider)
    record(provider.get_tracer("scripted-agents"))
    provider.shutdown()  # flushes the processor's queue: every span is tagged and exported
    handle.shutdown()
    spans = exporter.get_finished_spans()
    by_trace: dict[int, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    lines = [json.dumps(request_to_json(encode_spans(group))) for group in by_trace.values()]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(spans)} spans of {len(lines)} runs to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
