"""Per-agent runs inside one trace: a subagent's calls do not interleave with its parent's."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.processor import install

KEY = b"agent-scope-key-0123456789"


def _tool(tracer: Any, name: str, args: dict, result: Any) -> None:
    with tracer.start_as_current_span(f"execute_tool {name}", attributes={"gen_ai.operation.name": "execute_tool"}) as s:
        s.set_attribute("gen_ai.tool.name", name)
        s.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
        s.set_attribute("gen_ai.tool.call.result", json.dumps(result))


def _run(agent_scopes: bool) -> list[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(tracer_provider=provider, key=KEY, agent_scopes=agent_scopes)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(5):
            _tool(tracer, "lookup_order", {"order_id": "A12"}, {"status": "delivered"})
            # Each time, the planner hands one new question to a research subagent.
            with tracer.start_as_current_span("invoke_agent researcher", attributes={"gen_ai.operation.name": "invoke_agent"}):
                _tool(tracer, "search", {"q": f"question {i}"}, {"hits": [i]})
    provider.force_flush()
    provider.shutdown()
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]


def _decisions(spans: list[Any], tool: str) -> list[str]:
    return [e.attributes["loopguard.decision"] for s in spans if s.attributes["loopguard.tool.name"] == tool
            for e in s.events if e.name == "loopguard.decision" and e.attributes["loopguard.finding.kind"] == "repeat"]


def test_with_agent_scopes_the_planners_own_repeats_are_a_run_of_their_own() -> None:
    spans = _run(agent_scopes=True)
    planner = [s for s in spans if s.attributes["loopguard.tool.name"] == "lookup_order"]
    research = [s for s in spans if s.attributes["loopguard.tool.name"] == "search"]
    assert [s.attributes["loopguard.seq"] for s in planner] == [1, 2, 3, 4, 5]
    assert len({s.attributes["loopguard.run.id"] for s in planner}) == 1
    assert len({s.attributes["loopguard.run.id"] for s in research}) == 5  # one subagent run each
    assert all(s.attributes["loopguard.run.id"].startswith(format(s.context.trace_id, "032x") + "/") for s in spans)
    assert _decisions(spans, "lookup_order") == ["would_warn", "would_block"]  # the planner's loop, judged whole


def test_without_agent_scopes_the_trace_is_one_run() -> None:
    spans = _run(agent_scopes=False)
    assert len({s.attributes["loopguard.run.id"] for s in spans}) == 1
    assert sorted(s.attributes["loopguard.seq"] for s in spans) == list(range(1, 11))
    # Interleaved with the subagent's calls, the planner's repeats are never consecutive.
    assert _decisions(spans, "lookup_order") == []
