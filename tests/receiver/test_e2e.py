"""The real OTLP exporter -> otel-loopguard serve --forward -> a real gRPC sink."""

from __future__ import annotations

import pytest

from .agent import HEALTHY, LOOP, provider, run_agent
import json

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from .harness import ReceiverThread, Sink, attr, make_config, wait_for


@pytest.fixture
def receiver(sink: Sink):
    r = ReceiverThread(make_config(sink.port))
    yield r
    r.stop()


def test_looping_agent_spans_arrive_once_then_findings_name_the_offending_spans(sink: Sink, receiver: ReceiverThread) -> None:
    tp = provider(receiver.port)
    trace_id = run_agent(tp, LOOP)
    tp.shutdown()
    findings = wait_for(lambda: [s for s in sink.findings() if attr(s, "loopguard.finding.severity") == "stop"], what="stop finding")
    app_spans = [s for s in sink.spans() if not s.name.startswith("loopguard.")]
    assert len(app_spans) == 1 + 6 + 6  # root, chats, tools: each exactly once
    assert len({s.span_id for s in app_spans}) == len(app_spans)
    tool_ids = [s.span_id.hex() for s in sorted(app_spans, key=lambda s: s.start_time_unix_nano) if s.name.startswith("execute_tool")]
    stop = [f for f in findings if attr(f, "loopguard.finding.kind") == "repeat"][0]
    assert stop.trace_id.hex() == trace_id
    assert attr(stop, "loopguard.finding.span_ids") == tool_ids[:5]
    assert [link.span_id.hex() for link in stop.links] == tool_ids[:5]
    assert [e.name for e in stop.events] == ["gen_ai.evaluation.result"] + ["loopguard.call"] * 5
    assert (attr(stop, "loopguard.finding.first_seq"), attr(stop, "loopguard.finding.last_seq")) == (1, 5)
    assert attr(stop, "loopguard.tool.name") == "lookup_order"
    summary = wait_for(lambda: sink.runs(), what="run summary")[0]
    assert attr(summary, "loopguard.score.repeat_threshold_crossed") is True
    assert attr(summary, "loopguard.run.outcome") == "scored"


def _event_attrs(span: Span, name: str) -> dict[str, object]:
    (event,) = [e for e in span.events if e.name == name]
    return {kv.key: kv.value.string_value for kv in event.attributes}


def test_a_stop_stands_out_a_warn_does_not(sink: Sink, receiver: ReceiverThread) -> None:
    """What backends render (CONTRACT v1.1): name with detail, status ERROR for a stop only,
    OpenInference GUARDRAIL with input/output, the GenAI evaluation event; the run summary
    says in its status that the release rule fails."""
    tp = provider(receiver.port)
    run_agent(tp, LOOP)
    tp.shutdown()
    summary = wait_for(lambda: sink.runs(), what="run summary")[0]
    repeat = {attr(f, "loopguard.finding.severity"): f for f in sink.findings() if attr(f, "loopguard.finding.kind") == "repeat"}
    stop, warn = repeat["stop"], repeat["warn"]

    assert stop.name == "loopguard.finding stop repeat lookup_order"
    assert stop.kind == Span.SPAN_KIND_INTERNAL
    assert stop.status.code == Status.STATUS_CODE_ERROR
    assert stop.status.message == attr(stop, "loopguard.finding.reason") and "5 times" in stop.status.message
    assert attr(stop, "openinference.span.kind") == "GUARDRAIL"
    judged = json.loads(attr(stop, "input.value"))
    # The receiver saw the arguments unredacted (the backend holds them on the tool spans already).
    assert judged == {"tool": "lookup_order", "calls": "1-5", "arguments": json.dumps({"order_id": "A12"})}
    assert attr(stop, "output.value") == attr(stop, "loopguard.finding.reason")
    assert _event_attrs(stop, "gen_ai.evaluation.result") == {
        "gen_ai.evaluation.name": "loopguard.repeat",
        "gen_ai.evaluation.score.label": "stop",
        "gen_ai.evaluation.explanation": attr(stop, "loopguard.finding.reason"),
    }
    # First, at the span's start: the log Jaeger shows first carries the reason.
    assert stop.events[0].name == "gen_ai.evaluation.result"
    assert stop.events[0].time_unix_nano == stop.start_time_unix_nano == min(e.time_unix_nano for e in stop.events)

    # Negative control: the warn before it is the same kind of span, but not an error.
    assert warn.name == "loopguard.finding warn repeat lookup_order"
    assert warn.status.code == Status.STATUS_CODE_UNSET and warn.status.message == ""
    assert _event_attrs(warn, "gen_ai.evaluation.result")["gen_ai.evaluation.score.label"] == "warn"

    assert summary.name == "loopguard.run scored/fail"
    assert attr(summary, "loopguard.score.release.passed") is False
    assert summary.status.code == Status.STATUS_CODE_ERROR
    assert summary.status.message.startswith("the run fails the release rule: uncontained_loop")
    assert attr(summary, "openinference.span.kind") == "EVALUATOR"
    assert attr(summary, "output.value") == summary.status.message


def test_a_healthy_run_summary_passes_with_status_unset(sink: Sink, receiver: ReceiverThread) -> None:
    tp = provider(receiver.port)
    run_agent(tp, HEALTHY)
    tp.shutdown()
    summary = wait_for(lambda: sink.runs(), what="run summary")[0]
    assert sink.findings() == []
    assert summary.name == "loopguard.run scored/pass"
    assert summary.status.code == Status.STATUS_CODE_UNSET
    assert attr(summary, "output.value") == "the run passes the release rule"


def test_arguments_the_receiver_never_saw_are_not_in_the_finding(sink: Sink, receiver: ReceiverThread) -> None:
    """Spans tagged and redacted by the processor carry digests only: the finding's input says
    which tool and calls, and holds no arguments (nothing to leak, nothing invented)."""
    from .harness import TaggedRun, export_stub, request_of

    run = TaggedRun(seed=7)
    channel, stub = export_stub(receiver.port)
    stub.Export(request_of([run.call(s) for s in range(1, 6)] + [run.root()]), timeout=10)
    channel.close()
    stop = wait_for(lambda: [f for f in sink.findings() if attr(f, "loopguard.finding.severity") == "stop"], what="stop")[0]
    assert stop.status.code == Status.STATUS_CODE_ERROR
    assert json.loads(attr(stop, "input.value")) == {"tool": "lookup_order", "calls": "1-5"}
