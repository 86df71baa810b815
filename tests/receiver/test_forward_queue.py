"""Inline mode's forward queue (receiver/out/delivery.py): a backend outage absorbed, not pushed back.

The app is the OpenTelemetry SDK with its default batch processor and OTLP exporter, which
gives up on a batch after its 10 s timeout: the receiver has to take the spans while the
backend is down, or they are lost. The backend is a real OTLP server that goes down (its
port closed) and comes back on the same port.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector.backend import CountingBackend

from .agent import HEALTHY, LOOP, encode, record_spans, run_agent
from .harness import ReceiverThread, Sink, export_stub, make_config, wait_for

QUEUE = 256 * 1024 * 1024


def _app_through_outage(receiver_port: int, backend: CountingBackend, outage: float) -> set[tuple[str, str]]:
    """Agents traced with the SDK's defaults while the backend is down for `outage` seconds."""
    provider = TracerProvider(resource=Resource.create({"service.name": "outage-app"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{receiver_port}", insecure=True)))
    ledger = InMemorySpanExporter()  # every span the app ended, beside the real exporter
    provider.add_span_processor(SimpleSpanProcessor(ledger))
    backend.down()
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < outage:
        run_agent(provider, LOOP if n % 2 == 0 else HEALTHY)
        n += 1
        time.sleep(0.5)
    backend.up()
    provider.force_flush(30_000)
    provider.shutdown()
    return {(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in ledger.get_finished_spans()}


@pytest.mark.parametrize("queue_bytes", [QUEUE, 0], ids=["queued", "negative control: no queue"])
def test_a_backend_outage_longer_than_the_sdks_timeout(queue_bytes: int) -> None:
    backend = CountingBackend()
    receiver = ReceiverThread(make_config(backend.port, forward_queue_bytes=queue_bytes, forward_timeout_seconds=5.0))
    try:
        # 20 s: the first batch (sent 5 s in) is past the exporter's 10 s deadline before the backend returns.
        created = _app_through_outage(receiver.port, backend, outage=20.0)
        if queue_bytes:
            wait_for(lambda: created <= set(backend.app_counts()), 30, "every span at the backend")
            time.sleep(0.5)
            counts = backend.app_counts()
            assert all(counts[k] == 1 for k in created) and set(counts) == created  # once each, nothing else
            wait_for(lambda: any(f.kind == "repeat" and f.severity == "stop" for f in backend.snapshot()[1]), 15,
                     "the loops' findings after their spans")
        else:
            time.sleep(2.0)  # the SDK has given up on the batches the outage refused
            lost = created - set(backend.app_counts())
            assert lost, "without the queue the SDK's exporter drops what the outage refused"
    finally:
        receiver.stop()
        backend.down()


def test_a_full_queue_answers_unavailable_at_once_and_remembers_nothing() -> None:
    backend = CountingBackend()
    backend.down()
    receiver = ReceiverThread(make_config(backend.port, forward_queue_bytes=1, retry_after_seconds=0.5))
    channel, stub = export_stub(receiver.port)
    try:
        _, first = record_spans(HEALTHY[:2])
        _, second = record_spans(HEALTHY[2:4])
        stub.Export(encode(first), timeout=5)  # an empty queue takes any request
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(encode(second), timeout=5)
        assert time.monotonic() - t0 < 1.0  # at once, not after a forward timeout
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        trailers = dict(refused.value.trailing_metadata() or ())
        assert "google.rpc.retryinfo-bin" in trailers and "forward queue is full" in refused.value.details()
        backend.up()
        wait_for(lambda: len(backend.app_counts()) == len(first), 15, "the queued request delivered")
        stub.Export(encode(second), timeout=5)  # the retry is new to the receiver, not a duplicate
        wait_for(lambda: len(backend.app_counts()) == len(first) + len(second), 15, "the retried request delivered")
        assert set(backend.app_counts().values()) == {1}
    finally:
        channel.close()
        receiver.stop()
        backend.down()


def test_findings_never_overtake_the_spans_they_are_about() -> None:
    sink = Sink()
    sink.down = True  # answers UNAVAILABLE: everything waits in the receiver
    receiver = ReceiverThread(make_config(sink.port, forward_queue_bytes=QUEUE))
    channel, stub = export_stub(receiver.port)
    try:
        trace_id, spans = record_spans(LOOP)
        stub.Export(encode(spans), timeout=5)
        wait_for(lambda: receiver.sync(lambda: receiver.running.metrics.render()).count("findings_total{") > 0, 10,
                 "the run judged while the downstream is down")
        sink.down = False
        wait_for(lambda: sink.findings(), 15, "the findings delivered")
        order = [s.name for r in sink.requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]
        first_finding = min(i for i, name in enumerate(order) if name.startswith("loopguard."))
        assert len([n for n in order[:first_finding] if not n.startswith("loopguard.")]) == len(spans)
    finally:
        channel.close()
        receiver.stop()
        sink.stop()


def test_shutdown_with_the_downstream_down_says_what_it_could_not_deliver(caplog: Any) -> None:
    backend = CountingBackend()
    backend.down()
    receiver = ReceiverThread(make_config(backend.port, forward_queue_bytes=QUEUE))
    channel, stub = export_stub(receiver.port)
    _, spans = record_spans(HEALTHY[:2])
    stub.Export(encode(spans), timeout=5)
    channel.close()
    metrics = receiver.running.metrics
    with caplog.at_level(logging.ERROR, logger="otel_loopguard.receiver"):
        receiver.call(receiver.running.stop(grace=1.0))
        receiver.loop.call_soon_threadsafe(receiver.loop.stop)
    assert any("not delivered" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert f"otel_loopguard_spans_dropped_downstream_total {len(spans)}" in metrics.render()
