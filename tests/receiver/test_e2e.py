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
    # The evaluation, the calls, then the no_progress over the same calls riding on it (issue 29).
    assert [e.name for e in stop.events][:6] == ["gen_ai.evaluation.result"] + ["loopguard.call"] * 5
    riders = [{kv.key: kv.value for kv in e.attributes} for e in stop.events[6:]]
    assert {e.name for e in stop.events[6:]} == {"loopguard.finding"}
    assert {r["loopguard.finding.kind"].string_value for r in riders} == {"no_progress"}
    assert all(r["loopguard.run.id"].string_value == attr(stop, "loopguard.run.id") for r in riders)
    assert sorted(attr(stop, "loopguard.finding.episode_kinds")) == ["no_progress", "repeat"]
    assert not [f for f in sink.findings() if attr(f, "loopguard.finding.kind") == "no_progress"]
    # What the loop cost: 5 calls; the decisions before calls 2-5 (1000 x turn input tokens, 20 output each).
    assert attr(stop, "loopguard.finding.waste.calls") == 5
    assert (attr(stop, "loopguard.finding.waste.model_calls"), attr(stop, "loopguard.finding.waste.input_tokens"),
            attr(stop, "loopguard.finding.waste.output_tokens")) == (4, 14_000, 80)
    assert attr(stop, "loopguard.finding.waste.cost_usd") is None  # the default policy prices no model
    assert attr(stop, "loopguard.finding.waste.share_calls") == round(5 / 6, 4)
    assert 0 < attr(stop, "loopguard.finding.waste.seconds") and 0 < attr(stop, "loopguard.finding.waste.share_seconds") <= 1
    assert (attr(stop, "loopguard.finding.first_seq"), attr(stop, "loopguard.finding.last_seq")) == (1, 5)
    assert attr(stop, "loopguard.tool.name") == "lookup_order"
    summary = wait_for(lambda: sink.runs(), what="run summary")[0]
    # The run's waste: the loop's calls once, however many findings name them (repeat 1-5, no_progress 2-4).
    assert attr(summary, "loopguard.run.waste.calls") == 5
    assert attr(summary, "loopguard.run.waste.share_calls") == round(5 / 6, 4)
    assert attr(summary, "loopguard.run.waste.input_tokens") == sum(1000 * i for i in range(2, 6))
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
    # One loop, one finding (issue 29): the warn at call 3 left the receiver with its stop, folded into it.
    assert set(repeat) == {"stop"}
    stop = repeat["stop"]
    assert attr(stop, "loopguard.finding.warned_at_seq") == 3
    assert attr(stop, "loopguard.finding.reason").endswith("; enforce mode would deny call 5: see docs/guard.md")

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

    assert summary.name == "loopguard.run scored/fail"
    assert attr(summary, "loopguard.score.release.passed") is False
    assert summary.status.code == Status.STATUS_CODE_ERROR
    assert summary.status.message.startswith("the run fails the release rule: uncontained_loop")
    assert attr(summary, "openinference.span.kind") == "EVALUATOR"
    assert attr(summary, "output.value") == summary.status.message


def test_a_warn_with_no_stop_after_it_leaves_as_itself_and_is_no_error(sink: Sink, receiver: ReceiverThread) -> None:
    """Negative control of the folding: three repeated calls, then the agent moves on."""
    tp = provider(receiver.port)
    run_agent(tp, LOOP[:3] + HEALTHY[3:])
    tp.shutdown()
    wait_for(lambda: sink.runs(), what="run summary")
    (warn,) = [f for f in sink.findings() if attr(f, "loopguard.finding.kind") == "repeat"]
    assert warn.name == "loopguard.finding warn repeat lookup_order"
    assert warn.status.code == Status.STATUS_CODE_UNSET and warn.status.message == ""
    assert _event_attrs(warn, "gen_ai.evaluation.result")["gen_ai.evaluation.score.label"] == "warn"
    assert attr(warn, "loopguard.finding.warned_at_seq") is None
    assert "enforce mode" not in attr(warn, "loopguard.finding.reason")  # a next step is a stop's only


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
