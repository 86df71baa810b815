"""The app's exporter drops a run's LAST tool calls (its queue overflowed, issue 27): no hole in
the numbers says so, but the root span the processor hands on says how many calls it numbered
(`loopguard.run.calls`). install() + the real OTLP exporter -> the real receiver -> a real sink:
the run's summary is marked `incomplete_trace` with `loopguard.run.calls_missing`. Control: the
same run with nothing dropped is scored."""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional, Sequence

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from otel_loopguard.processor import install
from processor.helpers import KEY
from receiver.harness import ReceiverThread, Sink, attr, make_config, wait_for


class _DropsLastCalls(SpanExporter):
    """The real OTLP exporter, minus tool spans numbered above `keep` (a full queue's drop)."""

    def __init__(self, inner: SpanExporter, keep: int):
        self._inner, self._keep = inner, keep

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        kept = [s for s in spans if int((s.attributes or {}).get("loopguard.seq", 0)) <= self._keep]
        return self._inner.export(kept) if kept else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._inner.shutdown()


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.stop()


@pytest.fixture
def receiver(sink: Sink, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReceiverThread]:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    r = ReceiverThread(make_config(sink.port, idle_timeout_seconds=30.0))
    yield r
    r.stop()


def _run(port: int, keep: int, root: Optional[dict[str, Any]] = None) -> None:
    tp = TracerProvider(resource=Resource.create({"service.name": "dropping-agent"}))
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=10)
    tp.add_span_processor(SimpleSpanProcessor(_DropsLastCalls(exporter, keep)))
    handle = install(tracer_provider=tp)
    tracer = tp.get_tracer("agent")
    try:
        with tracer.start_as_current_span("invoke_agent support", attributes=root):
            for n in range(1, 6):  # five different lookups: a passing run when whole
                marked = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"}
                with tracer.start_as_current_span("execute_tool lookup_order", attributes=marked) as span:
                    span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": f"A{n}"}))
                    span.set_attribute("gen_ai.tool.call.result", json.dumps({"status": f"s{n}"}))
        assert tp.force_flush(10_000)
    finally:
        handle.shutdown()
        tp.shutdown()


def _summary(sink: Sink) -> Any:
    (summary,) = wait_for(lambda: sink.runs(), what="the run's summary", timeout=20)
    return summary


AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}


@pytest.mark.parametrize("root", [None, AGENT], ids=["plain-root", "invoke-agent-root"])
def test_the_last_calls_dropped_by_the_app_mark_the_run(sink: Sink, receiver: ReceiverThread,
                                                         root: Optional[dict[str, Any]]) -> None:
    _run(receiver.port, keep=3, root=root)
    summary = _summary(sink)
    assert attr(summary, "loopguard.run.outcome") == "incomplete_trace"
    assert attr(summary, "loopguard.run.calls_missing") == 2
    assert attr(summary, "loopguard.score.scorable") is False


@pytest.mark.parametrize("root", [None, AGENT], ids=["plain-root", "invoke-agent-root"])
def test_control_nothing_dropped_is_scored(sink: Sink, receiver: ReceiverThread, root: Optional[dict[str, Any]]) -> None:
    _run(receiver.port, keep=99, root=root)
    summary = _summary(sink)
    assert attr(summary, "loopguard.run.outcome") == "scored"
    assert attr(summary, "loopguard.run.calls_missing") is None
