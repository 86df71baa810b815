"""A downstream's partial success is final (OTLP: not retried) and reaches the sender."""

from __future__ import annotations

import logging
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from .agent import LOOP, encode, record_spans
from .harness import RUN, ReceiverThread, Sink, export_stub, make_config, make_span, wait_for


class PartialSink(Sink):
    """Takes everything, but says it refused `rejected` spans of each request."""

    def __init__(self, rejected: int) -> None:
        super().__init__()
        self.rejected = rejected

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        super().Export(request, context)
        partial = trace_service_pb2.ExportTracePartialSuccess(rejected_spans=self.rejected, error_message="quota exceeded")
        return trace_service_pb2.ExportTraceServiceResponse(partial_success=partial)


def test_the_downstreams_partial_success_is_passed_back_with_ours(caplog: pytest.LogCaptureFixture) -> None:
    sink = PartialSink(rejected=2)
    receiver = ReceiverThread(make_config(sink.port))
    try:
        _, spans = record_spans(LOOP)
        request = encode(spans)
        # One span of our own to reject (a zero span id): both refusals add up.
        request.resource_spans[0].scope_spans[0].spans.append(make_span(b"\x01" * 16, b"\x00" * 8, "bad"))
        channel, stub = export_stub(receiver.port)
        response = stub.Export(request, timeout=10)
        channel.close()
        assert response.partial_success.rejected_spans == 3
        assert "span_id must be 8 non-zero bytes" in response.partial_success.error_message
        assert "downstream: quota exceeded" in response.partial_success.error_message
        metrics = receiver.running.metrics
        assert metrics.get("spans_rejected_downstream_total") == 2
        assert metrics.get("spans_forwarded_total") == 13 - 2
        caplog.set_level(logging.WARNING, logger="otel_loopguard.receiver")
        wait_for(lambda: sink.runs(), what="run summary")
        wait_for(lambda: metrics.get("finding_spans_dropped_total") >= 2, what="findings' partial success counted")
    finally:
        receiver.stop()
        sink.stop()
    assert "rejected 2 of" in caplog.text and "quota exceeded" in caplog.text


def test_a_full_success_adds_nothing_to_the_response() -> None:
    """Negative control: a plain downstream answer leaves the sender's response empty."""
    sink = Sink()
    receiver = ReceiverThread(make_config(sink.port))
    try:
        _, spans = record_spans(LOOP)
        channel, stub = export_stub(receiver.port)
        response = stub.Export(encode(spans), timeout=10)
        channel.close()
        assert not response.HasField("partial_success")
        assert receiver.running.metrics.get("spans_rejected_downstream_total") == 0
        assert receiver.running.metrics.get("spans_forwarded_total") == 13
    finally:
        receiver.stop()
        sink.stop()
