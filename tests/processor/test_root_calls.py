"""The root of a trace whose own run had tool calls says how many the processor numbered
(`loopguard.run.calls`, root.py): a receiver tells from it that the run's last calls were lost."""

from __future__ import annotations

from typing import Iterator

import pytest
from opentelemetry.trace import Status, StatusCode

from otel_loopguard.processor.root import RUN_CALLS

from .helpers import Stack, make_stack
from .test_root_mark import HEALTHY, LOOP, _calls, _root, _run


@pytest.fixture
def stack() -> Iterator[Stack]:
    made = make_stack()
    yield made
    made.shutdown()


def test_the_root_says_how_many_calls_its_run_made(stack: Stack) -> None:
    three = _run(stack.tracer, HEALTHY[:3])
    five = _run(stack.tracer, HEALTHY)
    spans = stack.spans()
    assert (_root(spans, three).attributes or {}).get(RUN_CALLS) == 3
    assert (_root(spans, five).attributes or {}).get(RUN_CALLS) == 5
    # Only roots carry it: never a tool span.
    assert not any(RUN_CALLS in (s.attributes or {}) for s in spans if s.parent is not None)


def test_a_stopped_runs_root_has_both_the_stop_and_the_count(stack: Stack) -> None:
    looping = _run(stack.tracer, LOOP)
    root = _root(stack.spans(), looping)
    assert root.status.status_code is StatusCode.ERROR
    assert (root.attributes or {}).get(RUN_CALLS) == 5


def test_a_trace_without_tool_calls_gets_no_count(stack: Stack) -> None:
    with stack.tracer.start_as_current_span("invoke_agent support") as root:
        with stack.tracer.start_as_current_span("chat model"):
            pass
    trace_id = int(root.get_span_context().trace_id)
    (exported,) = [s for s in stack.spans() if s.context.trace_id == trace_id and s.parent is None]
    assert RUN_CALLS not in (exported.attributes or {})


def test_the_applications_own_attribute_is_kept(stack: Stack) -> None:
    with stack.tracer.start_as_current_span("invoke_agent support") as root:
        root.set_attribute(RUN_CALLS, "the app's")
        _calls(stack.tracer, HEALTHY[:2])
        root.set_status(Status(StatusCode.OK))
    trace_id = int(root.get_span_context().trace_id)
    exported = _root(stack.spans(), trace_id)
    assert (exported.attributes or {}).get(RUN_CALLS) == "the app's"
    assert exported.status.status_code is StatusCode.OK
    # The next trace is counted on its own (the kept one left nothing behind).
    other = _run(stack.tracer, HEALTHY[:1])
    assert (_root(stack.spans(), other).attributes or {}).get(RUN_CALLS) == 1



@pytest.mark.parametrize("kwargs", [{"agent_scopes": True}, {"run_id_attribute": "session.id"}],
                         ids=["agent-scoped", "conversation-keyed"])
def test_a_run_that_is_not_the_traces_own_is_not_counted_on_its_root(kwargs: dict) -> None:
    """The count is the trace's own run's: a receiver compares it with that run alone."""
    made = make_stack(**kwargs)
    try:
        agent = {"gen_ai.operation.name": "invoke_agent", "session.id": "conversation-42"}
        with made.tracer.start_as_current_span("invoke_agent support", attributes=agent) as root:
            for n in range(3):
                marked = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                          "session.id": "conversation-42", "gen_ai.tool.call.arguments": f'{{"n": {n}}}'}
                with made.tracer.start_as_current_span("execute_tool lookup_order", attributes=marked):
                    pass
        spans = made.spans()
        tools = [s for s in spans if s.parent is not None]
        assert len(tools) == 3 and all((s.attributes or {})["loopguard.run.id"] != format(
            root.get_span_context().trace_id, "032x") for s in tools)
        assert RUN_CALLS not in (_root(spans, int(root.get_span_context().trace_id)).attributes or {})
    finally:
        made.shutdown()


def test_a_root_marked_as_an_agent_is_counted_and_marked_too(stack: Stack) -> None:
    """`invoke_agent` roots carry a marker key (gen_ai.operation.name): they pass through the tagger,
    which hands them on counted (and, for a stopped run, marked) as any root."""
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with stack.tracer.start_as_current_span("invoke_agent support", attributes=agent) as healthy:
        _calls(stack.tracer, HEALTHY[:3])
    with stack.tracer.start_as_current_span("invoke_agent support", attributes=agent) as looping:
        _calls(stack.tracer, LOOP)
    spans = stack.spans()
    first = _root(spans, int(healthy.get_span_context().trace_id))
    assert (first.attributes or {}).get(RUN_CALLS) == 3 and first.status.status_code is StatusCode.UNSET
    second = _root(spans, int(looping.get_span_context().trace_id))
    assert (second.attributes or {}).get(RUN_CALLS) == 5 and second.status.status_code is StatusCode.ERROR
