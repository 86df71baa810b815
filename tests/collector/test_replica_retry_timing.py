"""What the real Collector does when a replica refuses a request, with the shipped sharded.yaml.

collector_config/README.md ("Retries and queues behind the load balancer") reads from the
source of the release builder.yaml pins that the per-replica exporter retries a refused
request itself, from `protocol.otlp.retry_on_failure`, after the larger of its backoff and the
RetryInfo delay the replica asks for, and that the load balancer's top-level retry does not
govern. Here a stand-in replica refuses requests and times the Collector's retries:

- refused with RetryInfo (1 s, as otel-loopguard asks): the retry comes about 1 s later;
- refused without RetryInfo: it comes after protocol.otlp's backoff (500 ms +-50%), sooner
  than the top-level retry's 1 s +-50% could make certain, and far sooner than the 2.5-7.5 s
  of the OTLP exporter's default, which the negative control shows when protocol.otlp leaves
  retry_on_failure out (the top-level retry is then still set, and still does not govern).

Either way the refused span reaches the replica well within the replica command's
--root-grace-seconds (tests/collector/test_replica_grace.py checks the arithmetic).
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any, Optional

import grpc
import pytest
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from .otelcol import Collector, fill
from .ports import reserved_port
from .test_replica_grace import receiver_settings, serve_commands

pytestmark = pytest.mark.collector

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
CONFIG = Path(__file__).resolve().parents[2] / "collector_config" / "sharded.yaml"


class StandIn:
    """An OTLP/gRPC trace endpoint that notes when each request arrives and refuses those it is told to."""

    def __init__(self) -> None:
        self.port = reserved_port()
        self.arrivals: list[float] = []
        self.refuse: list[Optional[float]] = []  # one entry per request to refuse: its RetryInfo delay, or None
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handler = grpc.unary_unary_rpc_method_handler(self._export)  # raw bytes in and out
        self._server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": handler})])
        self._server.add_insecure_port(f"127.0.0.1:{self.port}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "StandIn":
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=None)

    def _export(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        with self._lock:
            self.arrivals.append(time.monotonic())
            refuse = self.refuse.pop(0) if self.refuse else False
        if refuse is not False:
            if refuse is not None:
                delay = duration_pb2.Duration(seconds=int(refuse), nanos=int(refuse % 1 * 1e9))
                packed = any_pb2.Any()
                packed.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
                status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="retry shortly", details=[packed])
                context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNAVAILABLE, "retry shortly")
        return trace_service_pb2.ExportTraceServiceResponse().SerializeToString()


def _one_span(n: int) -> bytes:
    span = trace_pb2.Span(trace_id=bytes([n]) * 16, span_id=bytes([n]) * 8, name="tool",
                          start_time_unix_nano=time.time_ns(), end_time_unix_nano=time.time_ns() + 1000)
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[trace_pb2.ResourceSpans(
        scope_spans=[trace_pb2.ScopeSpans(scope=common_pb2.InstrumentationScope(name="t"), spans=[span])])])
    return request.SerializeToString()


def _collector(tmp_path: Path, replica: StandIn, backend: StandIn, change: Any = None) -> Collector:
    filled = fill(CONFIG.name, backend=backend.address, loopguard=[replica.address])
    otlp = filled.doc["exporters"]["loadbalancing"]["protocol"]["otlp"]
    otlp["tls"] = {"insecure": True}  # the stand-in speaks plaintext; nothing else about the file changes
    if change is not None:
        change(filled.doc)
    return Collector(filled, tmp_path, env={"LOOPGUARD_TOKEN": "t"}).start()


def _refused_then_retried(collector: Collector, replica: StandIn, n: int, retry_info: Optional[float]) -> tuple[float, float]:
    """(the wait between the refusal and the retry, the refused span's delay from sending to acceptance)."""
    before = len(replica.arrivals)
    replica.refuse.append(retry_info)
    sent = time.monotonic()
    with grpc.insecure_channel(f"127.0.0.1:{collector.port('otlp')}", options=[("grpc.enable_http_proxy", 0)]) as ch:
        ch.unary_unary(EXPORT)(_one_span(n), timeout=10, wait_for_ready=True)
    deadline = time.monotonic() + 20
    while len(replica.arrivals) < before + 2:
        assert time.monotonic() < deadline, f"no retry reached the replica; arrivals {replica.arrivals[before:]}"
        time.sleep(0.02)
    first, second = replica.arrivals[before], replica.arrivals[before + 1]
    return second - first, second - sent


@pytest.fixture
def endpoints() -> Any:
    replica, backend = StandIn().start(), StandIn().start()
    yield replica, backend
    replica.stop()
    backend.stop()


def test_the_per_replica_exporter_retries_as_the_file_says(tmp_path: Path, endpoints: Any) -> None:
    replica, backend = endpoints
    grace, _ = receiver_settings(serve_commands(CONFIG.read_text(encoding="utf-8"))[0])
    collector = _collector(tmp_path, replica, backend)
    try:
        # RetryInfo 1 s beats protocol.otlp's 250-750 ms backoff: the retry waits the 1 s asked for.
        wait, delay = _refused_then_retried(collector, replica, 1, retry_info=1.0)
        assert 0.95 <= wait <= 1.6, wait
        assert delay < grace, (delay, grace)
        # No RetryInfo: protocol.otlp's backoff, 500 ms +-50% (the top-level retry would give 0.5-1.5 s).
        waits = [_refused_then_retried(collector, replica, n, retry_info=None)[0] for n in (2, 3, 4)]
        assert all(0.2 <= w <= 1.0 for w in waits), waits
        assert max(waits) < 0.5 * 1.5 + 0.25 and min(waits) < 1.0, waits
    finally:
        collector.stop()


def test_negative_control_without_protocol_otlp_retry_the_otlp_default_governs(tmp_path: Path, endpoints: Any) -> None:
    """protocol.otlp without retry_on_failure: the OTLP exporter's default (5 s +-50%) applies, though
    the top-level retry_on_failure (1 s) is still set: the top level does not govern."""
    replica, backend = endpoints

    def drop_per_replica_retry(doc: dict[str, Any]) -> None:
        del doc["exporters"]["loadbalancing"]["protocol"]["otlp"]["retry_on_failure"]
        assert doc["exporters"]["loadbalancing"]["retry_on_failure"]["initial_interval"] == "1s"

    collector = _collector(tmp_path, replica, backend, drop_per_replica_retry)
    try:
        wait, _ = _refused_then_retried(collector, replica, 1, retry_info=None)
        assert 2.4 <= wait <= 8.0, wait
    finally:
        collector.stop()
