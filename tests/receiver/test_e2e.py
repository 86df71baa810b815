"""The real OTLP exporter -> otel-loopguard serve --forward -> a real gRPC sink."""

from __future__ import annotations

import pytest

from .agent import LOOP, provider, run_agent
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
    findings = wait_for(lambda: [s for s in sink.named("loopguard.finding") if attr(s, "loopguard.finding.severity") == "stop"], what="stop finding")
    app_spans = [s for s in sink.spans() if not s.name.startswith("loopguard.")]
    assert len(app_spans) == 1 + 6 + 6  # root, chats, tools: each exactly once
    assert len({s.span_id for s in app_spans}) == len(app_spans)
    tool_ids = [s.span_id.hex() for s in sorted(app_spans, key=lambda s: s.start_time_unix_nano) if s.name.startswith("execute_tool")]
    stop = [f for f in findings if attr(f, "loopguard.finding.kind") == "repeat"][0]
    assert stop.trace_id.hex() == trace_id
    assert attr(stop, "loopguard.finding.span_ids") == tool_ids[:5]
    assert [link.span_id.hex() for link in stop.links] == tool_ids[:5]
    assert [e.name for e in stop.events] == ["loopguard.call"] * 5
    assert (attr(stop, "loopguard.finding.first_seq"), attr(stop, "loopguard.finding.last_seq")) == (1, 5)
    assert attr(stop, "loopguard.tool.name") == "lookup_order"
    summary = wait_for(lambda: sink.named("loopguard.run"), what="run summary")[0]
    assert attr(summary, "loopguard.score.repeat_threshold_crossed") is True
    assert attr(summary, "loopguard.run.outcome") == "scored"
