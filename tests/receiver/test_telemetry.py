"""The receiver's own telemetry: Prometheus text over HTTP and the gRPC health service."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .agent import LOOP, encode, record_spans
from .harness import RUN, ReceiverThread, Sink, export_stub, make_config, wait_for

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


def _get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read().decode()


def _sample(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert match, f"{series} not in metrics:\n{text}"
    return float(match.group(1))


def test_prometheus_metrics_count_spans_findings_and_duplicates(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, metrics_listen="127.0.0.1:0"))
    try:
        port = receiver.running.metrics_port
        assert port
        _, spans = record_spans(LOOP)
        channel, stub = export_stub(receiver.port)
        stub.Export(encode(spans), timeout=10)
        stub.Export(encode(spans[:3]), timeout=10)  # a partial re-delivery
        channel.close()
        wait_for(lambda: sink.runs(), what="run summary")

        status, content_type, text = _get(port, "/metrics")
        assert status == 200
        assert content_type.startswith("text/plain") and "version=0.0.4" in content_type
        assert _sample(text, "otel_loopguard_spans_received_total") == 16
        # By severity too (issue 29): the warn folded into its stop still counts as a finding.
        assert _sample(text, 'otel_loopguard_findings_total{kind="repeat",severity="warn",tool="lookup_order"}') == 1
        assert _sample(text, 'otel_loopguard_findings_total{kind="repeat",severity="stop",tool="lookup_order"}') == 1
        # What the loop cost, counted once for the loop (its warn, its stop and the no_progress
        # over the same calls): calls 1-5, and the decisions before calls 2-5.
        assert _sample(text, 'otel_loopguard_loop_wasted_calls_total{kind="repeat",tool="lookup_order"}') == 5
        assert _sample(text, 'otel_loopguard_loop_wasted_tokens_total{kind="repeat",tool="lookup_order"}') == (
            sum(1000 * i + 20 for i in range(2, 6)))
        assert _sample(text, 'otel_loopguard_loop_wasted_seconds_total{kind="repeat",tool="lookup_order"}') > 0
        assert 'otel_loopguard_loop_wasted_calls_total{kind="no_progress"' not in text
        assert "otel_loopguard_loop_wasted_cost_usd_total 0" in text  # no model priced: no cost series
        assert _sample(text, "otel_loopguard_duplicates_total") == 3
        assert _sample(text, "otel_loopguard_spans_forwarded_total") == 13
        assert _sample(text, "otel_loopguard_runs_completed_total") == 1
        assert "# TYPE otel_loopguard_duplicates_total counter" in text
        assert "# TYPE otel_loopguard_runs_open gauge" in text
        for line in text.splitlines():  # every line is a comment or a sample
            assert line.startswith("# ") or re.match(r'^otel_loopguard_[a-z_]+(\{[^}]*\})? \S+$', line), line

        assert _get(port, "/nope")[0] == 404
    finally:
        receiver.stop()


@pytest.mark.parametrize("service", ["", TRACE_SERVICE])
def test_grpc_health_answers_serving(sink: Sink, service: str) -> None:
    receiver = ReceiverThread(make_config(sink.port))
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{receiver.port}")
        health = health_pb2_grpc.HealthStub(channel)
        response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert response.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as caught:
            health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        channel.close()
    finally:
        receiver.stop()
