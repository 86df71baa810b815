"""Real gRPC pieces for receiver tests: a downstream sink and a receiver in a thread."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from concurrent import futures
from dataclasses import replace
from typing import Any, Callable, Optional

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from otel_loopguard.receiver.config import ReceiverConfig
from otel_loopguard.receiver.serve.server import Running, start


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    """A downstream OTLP endpoint that records every request; can be switched off."""

    def __init__(self, max_receive_bytes: Optional[int] = None) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.down = False
        self._lock = threading.Lock()
        options = [("grpc.max_receive_message_length", max_receive_bytes)] if max_receive_bytes else None
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        if self.down:
            context.abort(grpc.StatusCode.UNAVAILABLE, "sink is down")
        with self._lock:
            self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[Any]:
        with self._lock:
            return [s for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]

    def named(self, name: str) -> list[Any]:
        return [s for s in self.spans() if s.name == name]

    def findings(self) -> list[Any]:
        """Finding spans, identified as the contract says: by `loopguard.finding.kind`."""
        return [s for s in self.spans() if attr(s, "loopguard.finding.kind") is not None]

    def runs(self) -> list[Any]:
        """Run summaries: `loopguard.run <outcome>[/pass|/fail]`."""
        return [s for s in self.spans() if s.name.split(" ", 1)[0] == RUN]

    def stop(self) -> None:
        self.server.stop(0)


class ReceiverThread:
    """`otel-loopguard serve` running on its own event loop in a thread."""

    def __init__(self, config: ReceiverConfig):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.running: Running = self.call(start(config))
        self.port = self.running.port

    def call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def sync(self, fn: Callable[[], Any]) -> Any:
        async def wrapper() -> Any:
            return fn()

        return self.call(wrapper())

    def stop(self) -> None:
        try:
            self.call(self.running.stop(grace=5.0))
        finally:  # even when stopping failed, do not leave the loop thread behind
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)


def make_config(forward_port: int, **overrides: Any) -> ReceiverConfig:
    base = ReceiverConfig(
        listen="127.0.0.1:0",
        forward=f"127.0.0.1:{forward_port}",
        root_grace_seconds=0.2,
        idle_timeout_seconds=2.0,
        gap_wait_seconds=1.0,
        forward_timeout_seconds=1.0,
        retry_after_seconds=0.2,
        # Forward before answering, so a test sees the downstream's state when Export returns;
        # the forward queue (the default) has its own tests (test_forward_queue.py), and the
        # end-to-end tests (tests/e2e, tests/collector) run the receiver with its defaults.
        forward_queue_bytes=0,
    )
    return replace(base, **overrides)


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def attr(span: Any, key: str) -> Optional[Any]:
    for kv in span.attributes:
        if kv.key == key:
            v = kv.value
            kind = v.WhichOneof("value")
            if kind == "array_value":
                return [x.string_value for x in v.array_value.values]
            return getattr(v, kind) if kind else None
    return None


# -- helpers for hand-made requests (added for the receiver integration tests) --------------

FINDING = "loopguard.finding"
RUN = "loopguard.run"


def export_stub(port: int, **options: Any) -> tuple[grpc.Channel, trace_service_pb2_grpc.TraceServiceStub]:
    """A plain gRPC client of the receiver: send hand-made ExportTraceServiceRequests."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=list(options.items()))
    return channel, trace_service_pb2_grpc.TraceServiceStub(channel)


def app_spans(sink: Sink) -> list[Any]:
    """Spans the app sent (everything that is not a finding or a run summary)."""
    return [s for s in sink.spans() if not s.name.startswith("loopguard.")]


def finding_key(span: Any) -> tuple[Any, ...]:
    """What makes two findings the same: kind, severity, seq range, count, offending spans."""
    return (
        attr(span, "loopguard.finding.kind"),
        attr(span, "loopguard.finding.severity"),
        attr(span, "loopguard.finding.first_seq"),
        attr(span, "loopguard.finding.last_seq"),
        attr(span, "loopguard.finding.count"),
        tuple(attr(span, "loopguard.finding.span_ids") or ()),
    )


def read_findings(sink: Sink) -> list[tuple[Any, ...]]:
    """The findings as a reader gets them, whether they left together or one by one (issue 29):
    a finding riding on another as a `loopguard.finding` event counts as itself; a warn folded
    into its stop, or named by it (`warn_span_id`), is what the stop's `warned_at_seq` says."""
    spans = sink.findings()
    named = {attr(s, "loopguard.finding.warn_span_id") for s in spans} - {None}
    out = [(*finding_key(s), attr(s, "loopguard.finding.warned_at_seq")) for s in spans if s.span_id.hex() not in named]
    for s in spans:
        for e in s.events:
            if e.name == "loopguard.finding":
                out.append((*finding_key(e), attr(e, "loopguard.finding.warned_at_seq")))
    return sorted(out, key=repr)


def findings_of(sink: Sink, *, kind: Optional[str] = None, exclude: tuple[str, ...] = ()) -> list[Any]:
    spans = sink.findings()
    return [
        s for s in spans
        if (kind is None or attr(s, "loopguard.finding.kind") == kind)
        and attr(s, "loopguard.finding.kind") not in exclude
    ]


def kv(key: str, value: Any) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def make_span(trace_id: bytes, span_id: bytes, name: str, *, parent: bytes = b"", start: int = 0,
              end: int = 0, attributes: Optional[dict[str, Any]] = None) -> Any:
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    span = Span(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name,
                kind=Span.SPAN_KIND_INTERNAL, start_time_unix_nano=start, end_time_unix_nano=end)
    span.attributes.extend(kv(k, v) for k, v in (attributes or {}).items())
    return span


def request_of(spans: list[Any], service: str = "hand-made-agent") -> Any:
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

    resource = Resource(attributes=[kv("service.name", service)])
    return trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=list(spans))])]
    )


class TaggedRun:
    """Tool spans as the in-process processor tags them (CONTRACT section 1), built by hand.

    Every call of the run is the same action with the same result (a loop) unless told
    otherwise; each call is its own decision (turn == seq). The root span is NOT sent
    unless `root()` is used, so the run stays open.
    """

    ARGS = "a" * 32
    RESULT = "b" * 32

    def __init__(self, run_id: Optional[str] = None, *, convention: str = "gen_ai", tool: str = "lookup_order",
                 key_id: str = "kid-test-1", seed: int = 1):
        import random

        rnd = random.Random(seed)
        self.trace_id = rnd.randbytes(16)
        self.root_id = rnd.randbytes(8)
        # Like the processor's default: the run is its trace (a root span completes it).
        self.run_id = run_id or self.trace_id.hex()
        self.convention = convention
        self.tool = tool
        self.key_id = key_id
        self.seed = seed
        self.t0 = time.time_ns() - 60_000_000_000
        self.span_ids: dict[int, bytes] = {}

    def call(self, seq: int, *, span_id: Optional[bytes] = None, args: Optional[str] = None,
             result: Optional[str] = None) -> Any:
        sid = span_id or self.span_ids.get(seq) or hashlib.sha256(f"{self.seed}:{seq}".encode()).digest()[:8]
        self.span_ids.setdefault(seq, sid)
        attrs: dict[str, Any] = {}
        if self.convention == "gen_ai":
            attrs.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self.tool,
                          "gen_ai.tool.call.id": f"call_{seq}"})
        else:
            attrs["loopguard.tool.name"] = self.tool
        attrs.update({
            "loopguard.tool.name": self.tool,
            "loopguard.seq": seq,
            "loopguard.turn": seq,
            "loopguard.args.digest": args or self.ARGS,
            "loopguard.result.digest": result or self.RESULT,
            "loopguard.key.id": self.key_id,
            "loopguard.run.id": self.run_id,
            "loopguard.outcome": "ok",
            "loopguard.mode": "observe",
        })
        start = self.t0 + seq * 1_000_000_000
        return make_span(self.trace_id, sid, f"execute_tool {self.tool}", parent=self.root_id,
                         start=start, end=start + 100_000_000, attributes=attrs)

    def root(self) -> Any:
        return make_span(self.trace_id, self.root_id, "invoke_agent support", start=self.t0,
                         end=self.t0 + 100 * 1_000_000_000)

    def hex(self, seq: int) -> str:
        return self.span_ids[seq].hex()


def judged_alone(spans: list[Any], key: str, requests: int = 1) -> tuple[list[Any], list[str]]:
    """The one run these OTLP spans make, judged by a RunAssembler of its own, the spans sent in
    `requests` requests in their order: (its calls in sequence order, its findings' names)."""
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

    from otel_loopguard.canon import load_key
    from otel_loopguard.fingerprint import Fingerprinter
    from otel_loopguard.policy import policy_from_mapping
    from otel_loopguard.receiver.ingest.decoder import decode
    from otel_loopguard.receiver.ops.metrics import Metrics
    from otel_loopguard.receiver.runs.assembly import RunAssembler
    from tests.frameworks.fw_labels import name_of

    assembler = RunAssembler(Fingerprinter(load_key(key=key), policy_from_mapping({})), make_config(1), Metrics())
    size = -(-len(spans) // requests)
    for i in range(0, len(spans), size):
        request = trace_service_pb2.ExportTraceServiceRequest(
            resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans[i:i + size])])])
        assembler.accept(decode(request.SerializeToString()).spans)
    (buffer,) = assembler.runs.values()
    written = assembler.flush()
    calls = [buffer.recent.get(seq) for seq in range(1, buffer.tool_calls_seen + 1)]
    names = [name_of(str(attr(s, "loopguard.finding.kind")), str(attr(s, "loopguard.finding.severity")),
                     attr(s, "loopguard.tool.name")) for s in written if attr(s, "loopguard.finding.kind")]
    return calls, names
