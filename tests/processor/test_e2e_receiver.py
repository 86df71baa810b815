"""install() + the real OTLP exporter -> the real receiver -> a real gRPC sink.

The receiver judges the processor's tags as they arrive: the stop finding streams out
while the agent's root span is still open, and names the offending spans.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from receiver.harness import FINDING, RUN, ReceiverThread, Sink, attr, make_config, wait_for

from otel_loopguard.processor import install

from .helpers import KEY, RAW_KEYS, captured, emit, fresh_noise, span_hex, tags


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.stop()


@pytest.fixture
def receiver(sink: Sink, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReceiverThread]:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)  # the receiver and the processor share the digest key
    # Only the root span (never the idle timer) completes the run within the test.
    r = ReceiverThread(make_config(sink.port, idle_timeout_seconds=30.0))
    yield r
    r.stop()


def _provider(port: int, *, batch: bool) -> tuple[TracerProvider, InMemorySpanExporter]:
    tp = TracerProvider(resource=Resource.create({"service.name": "installed-agent"}))
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=10)
    tp.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=20) if batch else SimpleSpanProcessor(exporter))
    local = InMemorySpanExporter()  # what the app exported, to know span ids and tags
    tp.add_span_processor(SimpleSpanProcessor(local))
    return tp, local


def _stop_repeat(sink: Sink) -> list[Any]:
    return [f for f in sink.findings()
            if attr(f, "loopguard.finding.kind") == "repeat" and attr(f, "loopguard.finding.severity") == "stop"]


@pytest.mark.parametrize(
    "tool_entry,model_entry,batch,redact",
    [
        ("genai_tool", "genai_chat", False, True),  # redacted: the receiver has nothing but the tags
        ("tl_lc_tool_1", "tl_lc_chat", True, False),  # LangChain + OpenLLMetry, per-call noise, batch export
    ],
)
def test_the_receiver_streams_the_stop_finding_from_the_processor_tags(
    sink: Sink, receiver: ReceiverThread, tool_entry: str, model_entry: str, batch: bool, redact: bool
) -> None:
    tp, local = _provider(receiver.port, batch=batch)
    handle = install(tracer_provider=tp, redact=redact)  # key from OTEL_LOOPGUARD_KEY, as the receiver
    tracer = tp.get_tracer("agent")
    tool = captured(tool_entry)
    root = tracer.start_span("invoke_agent support")
    try:
        with trace.use_span(root, end_on_exit=False):
            for _ in range(6):
                emit(tracer, captured(model_entry))
                emit(tracer, tool, attributes=fresh_noise(tool["attributes"]))
        assert tp.force_flush(10_000)

        stop = wait_for(lambda: _stop_repeat(sink), timeout=10, what="stop finding while the root is open")[0]
        assert root.is_recording(), "the root span has not ended"
        assert sink.named("invoke_agent support") == [] and sink.runs() == []

        tools = sorted((s for s in local.get_finished_spans() if s.name == tool["name"]), key=lambda s: tags(s)["loopguard.seq"])
        first_five = [span_hex(s) for s in tools[:5]]
        assert attr(stop, "loopguard.finding.span_ids") == first_five
        assert [link.span_id.hex() for link in stop.links] == first_five
        assert (attr(stop, "loopguard.finding.first_seq"), attr(stop, "loopguard.finding.last_seq")) == (1, 5)
        assert attr(stop, "loopguard.finding.count") == 5
        assert attr(stop, "loopguard.args.digest") == tags(tools[0])["loopguard.args.digest"]
        assert attr(stop, "loopguard.run.id") == tags(tools[0])["loopguard.run.id"] == format(root.get_span_context().trace_id, "032x")
        assert attr(stop, "loopguard.tool.name") == "lookup_order"
        assert stop.trace_id.hex() == tags(tools[0])["loopguard.run.id"]
        # The processor's own observe-only verdict agrees with the receiver's.
        assert [e.attributes["loopguard.decision"] for e in tools[4].events if e.name == "loopguard.decision"][-1] == "would_block"

        # The spans reached the backend tagged (and redacted when asked), each once.
        forwarded = sorted(sink.named(tool["name"]), key=lambda s: attr(s, "loopguard.seq"))
        assert [attr(s, "loopguard.seq") for s in forwarded] == [1, 2, 3, 4, 5, 6]
        assert {attr(s, "loopguard.key.id") for s in forwarded} == {handle.key_id}
        assert any(kv.key in RAW_KEYS for s in forwarded for kv in s.attributes) is not redact
    finally:
        root.end()
        tp.shutdown()
    summary = wait_for(lambda: sink.runs(), timeout=10, what="run summary after the root ended")[0]
    assert attr(summary, "loopguard.run.outcome") == "scored"
    assert len(_stop_repeat(sink)) == 1, "the streamed finding is not repeated at completion"


def _noisy_failure(n: int) -> str:
    """The same failure each time, with the clock, the pid, the attempt and a temp path moving."""
    return (f"2026-12-06 06:40:{10 + n:02d}.{(37 * n) % 1000:03d} ERROR [pid {4711 + n}] attempt {n + 1}: could not "
            f"reach the order service after {120 + 7 * n}ms\ntrace saved to /tmp/tmp{n}x9/trace.txt")


def test_a_redacted_app_s_noisy_loop_is_stopped_downstream_from_its_sketches(
        sink: Sink, receiver: ReceiverThread) -> None:
    """Issue 26: with redact=True the receiver has no payload, only the tags. Each result differs
    in its digest (the noise is inside the text); the sketches the processor sends
    (loopguard.result.shape_digest, .items, ...) let the receiver see the same answer, and stop
    the loop where the processor's own verdict does."""
    tp, local = _provider(receiver.port, batch=False)
    install(tracer_provider=tp, redact=True)
    tracer = tp.get_tracer("agent")
    tool = captured("genai_tool")
    root = tracer.start_span("invoke_agent support")
    try:
        with trace.use_span(root, end_on_exit=False):
            for n in range(6):
                emit(tracer, captured("genai_chat"))
                emit(tracer, tool, attributes={**fresh_noise(tool["attributes"]), "gen_ai.tool.call.result": _noisy_failure(n)})
        assert tp.force_flush(10_000)
        stop = wait_for(lambda: _stop_repeat(sink), timeout=10, what="stop finding from the sketches")[0]
        assert (attr(stop, "loopguard.finding.first_seq"), attr(stop, "loopguard.finding.last_seq")) == (1, 5)
        tools = [s for s in local.get_finished_spans() if s.name == tool["name"]]
        assert len({tags(s)["loopguard.result.digest"] for s in tools}) == 6  # every digest differs
        assert len({tags(s)["loopguard.result.shape_digest"] for s in tools}) == 1
        forwarded = sink.named(tool["name"])
        assert not any(kv.key in RAW_KEYS for s in forwarded for kv in s.attributes)  # nothing reversible left
    finally:
        root.end()
        tp.shutdown()
