"""A denial inside OpenLLMetry's LlamaIndex `call_tool` step: a generic `task` span that already
names its tool when the wrapped tool is asked, and the only span the denied call has (the wrapper
never opens the tool's own). Marked not dispatched, the processor, the receiver and the audit
count it as a call that did not run (tests/frameworks/test_enforce_wrappers.py runs the real
instrumentation); a step span naming no tool is left alone."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.enforce import make_guard

KEY = b"guard-test-key-0123456789"


def _denials_in_steps(**step: Any) -> list[Any]:
    """Seven identical calls, each inside a step span with `step`'s attributes; the step spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    guard = make_guard(key=KEY)

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        return {"status": "delivered"}

    with tracer.start_as_current_span("FunctionAgent.workflow"):
        for _ in range(7):
            with tracer.start_as_current_span("BaseWorkflowAgent.task", attributes=step):
                lookup_order("A12")
    return sorted((s for s in exporter.get_finished_spans() if s.name == "BaseWorkflowAgent.task"),
                  key=lambda s: s.start_time or 0)


def test_a_denial_inside_a_task_span_naming_its_tool_marks_it_not_dispatched() -> None:
    steps = _denials_in_steps(**{"traceloop.span.kind": "task", "tool.name": "lookup_order"})
    assert [s.attributes.get("loopguard.dispatched") for s in steps] == [None] * 4 + [False] * 3
    assert {s.attributes.get("loopguard.guard") for s in steps[4:]} == {"repeat"}


def test_negative_control_a_task_span_naming_no_tool_is_not_marked() -> None:
    """A workflow step that is no call (its model step, its agent step) keeps its deny event only."""
    steps = _denials_in_steps(**{"traceloop.span.kind": "task"})
    assert [e.attributes["loopguard.decision"] for s in steps for e in s.events].count("deny") == 3
    assert not [s for s in steps if "loopguard.dispatched" in (s.attributes or {})]
