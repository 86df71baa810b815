"""A counting tracing backend: a real OTLP/gRPC server that stores what a test must count.

It counts every span it receives by (trace id, span id), so a test sees spans lost (never
counted) and spans stored twice (counted twice). Finding spans and run summaries are kept
whole (attributes decoded). It can go down (the server stops: connection refused, as when a
backend is unreachable) and come back on the same port.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Optional

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from .ports import reserved_port


def value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass(frozen=True)
class Stored:
    """A loopguard span as the backend stored it."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    attributes: dict[str, Any]
    status_code: int

    @property
    def kind(self) -> str:
        return self.attributes.get("loopguard.finding.kind", "")

    @property
    def severity(self) -> str:
        return self.attributes.get("loopguard.finding.severity", "")

    def same_finding(self) -> tuple[Any, ...]:
        """What two receivers judging the same run must agree on (span ids of findings are new each time)."""
        a = self.attributes
        return (self.trace_id, self.parent_id, self.name, a.get("loopguard.finding.kind"),
                a.get("loopguard.finding.severity"), a.get("loopguard.finding.first_seq"),
                a.get("loopguard.finding.last_seq"), a.get("loopguard.finding.count"),
                tuple(a.get("loopguard.finding.span_ids") or ()), a.get("loopguard.finding.reason"),
                a.get("loopguard.run.id"))


class CountingBackend(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, port: Optional[int] = None, delay: float = 0.0) -> None:
        """`delay`: seconds each Export takes before it stores anything (a slow backend)."""
        self.port = port or reserved_port()
        self.delay = delay
        self.counts: Counter[tuple[str, str]] = Counter()
        self.findings: list[Stored] = []
        self.summaries: list[Stored] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._server: Optional[grpc.Server] = None
        self.up()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def up(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                             options=[("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.so_reuseport", 0)])
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, server)
        bound = server.add_insecure_port(self.address)
        assert bound == self.port, f"the backend could not listen on {self.address} again"
        server.start()
        self._server = server

    def down(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.requests += 1
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        self._store(span)
        return trace_service_pb2.ExportTraceServiceResponse()

    def _store(self, span: Any) -> None:
        trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
        self.counts[(trace_id, span_id)] += 1
        if span.name.startswith(("loopguard.finding", "loopguard.run")):
            stored = Stored(trace_id, span_id, span.parent_span_id.hex(), span.name,
                            {kv.key: value(kv.value) for kv in span.attributes}, span.status.code)
            (self.findings if span.name.startswith("loopguard.finding") else self.summaries).append(stored)

    def snapshot(self) -> tuple[Counter[tuple[str, str]], list[Stored], list[Stored]]:
        with self._lock:
            return Counter(self.counts), list(self.findings), list(self.summaries)

    def app_counts(self) -> Counter[tuple[str, str]]:
        """Counts of the spans that are not otel-loopguard's own."""
        counts, findings, summaries = self.snapshot()
        ours = {(s.trace_id, s.span_id) for s in findings + summaries}
        return Counter({k: n for k, n in counts.items() if k not in ours})
