"""A stopped run's root span leaves with status ERROR and the tool and count first (root.py).

Backends list traces by their root span: Phoenix's traces list shows its status and the start
of its status message in columns visible at 1400 px, where the annotations are not. So the
processor, which knows in-process when a run reached a stop, marks the root, and only a root
whose status the application left UNSET.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional

import pytest
from opentelemetry import trace as api
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from otel_loopguard.processor import LoopguardSpanExporter, ProcessorConfig, build_tagger
from otel_loopguard.processor.root import RootMarks

from .helpers import KEY, BlockedTagger, Stack, make_stack

VERDICT = "loopguard.run.verdict"
LOOP = [{"order_id": "A12"}] * 5  # the built-in policy stops a repeat at the 5th call
HEALTHY = [{"order_id": f"A{i}"} for i in range(1, 6)]


@pytest.fixture
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    kwargs = getattr(request, "param", {})
    made = make_stack(**kwargs)
    yield made
    made.shutdown()


def _calls(tracer: Any, calls: list[dict[str, Any]]) -> None:
    for arguments in calls:
        marked = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"}
        with tracer.start_as_current_span("execute_tool lookup_order", attributes=marked) as span:
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
            span.set_attribute("gen_ai.tool.call.result", json.dumps({"status": "delivered", **arguments}))


def _run(tracer: Any, calls: list[dict[str, Any]], status: Optional[Status] = None, context: Any = None) -> int:
    """An agent run under one root span; the root's trace id."""
    with tracer.start_as_current_span("invoke_agent support", context=context) as root:
        _calls(tracer, calls)
        if status is not None:
            root.set_status(status)
    return int(root.get_span_context().trace_id)


def _root(spans: list[ReadableSpan], trace_id: int) -> ReadableSpan:
    (root,) = [s for s in spans if s.context.trace_id == trace_id and s.name.startswith("invoke_agent")]
    return root


def _is_marked(span: ReadableSpan) -> bool:
    return span.status.status_code is StatusCode.ERROR and (span.attributes or {}).get(VERDICT) == "stop"


@pytest.mark.parametrize("stack", [{"mode": "observe"}, {"mode": "enforce"}], indirect=True, ids=["observe", "enforce"])
def test_a_looping_runs_root_is_marked_and_a_healthy_ones_is_not(stack: Stack) -> None:
    looping = _run(stack.tracer, LOOP)
    healthy = _run(stack.tracer, HEALTHY)
    spans = stack.spans()
    root = _root(spans, looping)
    assert _is_marked(root), (root.status, root.attributes)
    # Tool and count first: a list cuts the message after a few words.
    assert root.status.description == "lookup_order x5 repeat · loopguard stop"
    assert root.name == "invoke_agent support" and root.parent is None
    other = _root(spans, healthy)
    assert other.status.status_code is StatusCode.UNSET and VERDICT not in (other.attributes or {})
    # Nothing else changed status: the tool spans keep theirs (the repeat's calls succeeded).
    assert all(s.status.status_code is StatusCode.UNSET for s in spans if s.parent is not None)


def test_a_warn_alone_leaves_the_root_alone(stack: Stack) -> None:
    """Mutation check: one call fewer than the stop (a warn at 3, no stop): no mark."""
    trace_id = _run(stack.tracer, LOOP[:4])
    root = _root(stack.spans(), trace_id)
    assert root.status.status_code is StatusCode.UNSET and VERDICT not in (root.attributes or {})


def test_the_mark_keeps_the_roots_own_attributes(stack: Stack) -> None:
    with stack.tracer.start_as_current_span("invoke_agent support", attributes={"app.user": "u-7"}) as root:
        _calls(stack.tracer, LOOP)
    marked = _root(stack.spans(), root.get_span_context().trace_id)
    assert dict(marked.attributes or {}) == {"app.user": "u-7", VERDICT: "stop", "loopguard.run.calls": 5}
    assert marked.context.span_id == root.get_span_context().span_id and marked.end_time == root.end_time


@pytest.mark.parametrize("status", [Status(StatusCode.OK), Status(StatusCode.ERROR, "order service down")],
                         ids=["ok", "error"])
def test_a_status_the_app_set_is_left_alone(stack: Stack, status: Status) -> None:
    trace_id = _run(stack.tracer, LOOP, status)
    root = _root(stack.spans(), trace_id)
    assert root.status.status_code is status.status_code and root.status.description == status.description
    assert VERDICT not in (root.attributes or {})


@pytest.mark.parametrize("stack", [{"mark_root": False}], indirect=True)
def test_install_mark_root_false_leaves_roots_alone(stack: Stack) -> None:
    trace_id = _run(stack.tracer, LOOP)
    spans = stack.spans()
    root = _root(spans, trace_id)
    assert root.status.status_code is StatusCode.UNSET and VERDICT not in (root.attributes or {})
    assert any(e.name == "loopguard.decision" for s in spans for e in s.events)  # still judged


def test_the_variable_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_MARK_ROOT", "false")
    stack = make_stack()
    try:
        assert stack.handle is not None and stack.handle.config.mark_root is False
        trace_id = _run(stack.tracer, LOOP)
        root = _root(stack.spans(), trace_id)
        assert root.status.status_code is StatusCode.UNSET
    finally:
        stack.shutdown()


def test_a_root_that_ends_while_its_calls_are_tagged_is_still_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root queues behind tool spans still being tagged, so their stop is known when it passes."""
    blocked = BlockedTagger(monkeypatch)
    stack = make_stack()
    try:
        with stack.tracer.start_as_current_span("invoke_agent support") as root:
            _calls(stack.tracer, LOOP)
            assert blocked.started.wait(10), "the worker never started tagging"
        # The worker is still inside the first call: nothing of the run is judged yet.
        assert not any(s.name.startswith("invoke_agent") for s in stack.exporter.get_finished_spans())
        blocked.release.set()
        marked = _root(stack.spans(), root.get_span_context().trace_id)
        assert _is_marked(marked)
        names = [s.name for s in stack.exporter.get_finished_spans()]
        assert names[-1] == "invoke_agent support"  # after its calls, as it ended
    finally:
        blocked.release.set()
        stack.shutdown()


def test_a_run_whose_root_is_in_another_process_is_left_alone(stack: Stack) -> None:
    """A span with a remote parent roots nothing a list shows: the trace's root is not ours."""
    remote = SpanContext(trace_id=0x5EED, span_id=0xABCD, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    trace_id = _run(stack.tracer, LOOP, context=api.set_span_in_context(NonRecordingSpan(remote)))
    local = _root(stack.spans(), trace_id)
    assert trace_id == 0x5EED and local.parent is not None and local.parent.is_remote
    assert local.status.status_code is StatusCode.UNSET and VERDICT not in (local.attributes or {})


def test_a_failing_mark_never_reaches_the_app(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: RootMarks, span: ReadableSpan) -> ReadableSpan:
        raise RuntimeError("mark failed")

    monkeypatch.setattr(RootMarks, "mark", broken)
    trace_id = _run(stack.tracer, LOOP)  # raises here if the error reached the application
    root = _root(stack.spans(), trace_id)
    assert root.status.status_code is StatusCode.UNSET  # handed on as it ended


def test_the_zero_code_exporter_marks_the_root_too() -> None:
    inner = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(LoopguardSpanExporter(inner, build_tagger(ProcessorConfig(), key=KEY)),
                                                   schedule_delay_millis=20))
    tracer = provider.get_tracer("zero-code")
    looping, healthy = _run(tracer, LOOP), _run(tracer, HEALTHY)
    assert provider.force_flush(10_000)
    spans = list(inner.get_finished_spans())
    provider.shutdown()
    assert _is_marked(_root(spans, looping)) and not _is_marked(_root(spans, healthy))


def test_memory_is_bounded_when_roots_never_pass() -> None:
    """Traces whose root is elsewhere (a remote parent) are forgotten oldest first."""
    from otel_loopguard.findings import Finding

    marks = RootMarks(64)
    stop = Finding(kind="repeat", severity="stop", first_seq=1, last_seq=5, count=5, seqs=(1, 2, 3, 4, 5),
                   span_ids=(None,) * 5, reason="r", tool="lookup_order")
    for trace_id in range(10_000):
        marks.note(trace_id, None, [stop])
    assert len(marks._stops) <= 64  # noqa: SLF001


def test_the_description_leads_with_what_a_cut_list_keeps() -> None:
    """Tool and count first; a stop about no one tool (no progress, a budget) leads with its kind."""
    from otel_loopguard.findings import Finding
    from otel_loopguard.processor.root import description

    common = dict(severity="stop", first_seq=1, last_seq=6, seqs=(), span_ids=(), reason="r")
    assert description(Finding(kind="repeat", count=5, tool="lookup_order", **common)) == \
        "lookup_order x5 repeat · loopguard stop"
    assert description(Finding(kind="no_progress", count=6, **common)) == "no_progress x6 · loopguard stop"
