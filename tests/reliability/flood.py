"""Overload, for real: senders that offer far more spans than the receiver takes, a counting
sink behind it, and the receiver's resident memory sampled all along.

Senders behave as the OpenTelemetry SDK's exporter does: a batch refused with UNAVAILABLE is
retried after the RetryInfo delay until its deadline (10 s), then dropped (the sender's loss,
counted apart: the receiver never accepted it). Every request carries fresh trace ids, so
every span is new to the dedupe table, and a share of its traces are agent runs that never
complete (tool calls without a root span): open runs that only the memory bound can end.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import grpc
from google.rpc import error_details_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

TRACES_PER_REQUEST = 16
SPANS_PER_TRACE = 32
SPANS_PER_REQUEST = TRACES_PER_REQUEST * SPANS_PER_TRACE
OPEN_RUN_EVERY = 4  # every fourth trace is an agent run whose root never arrives
SENDER_DEADLINE = 10.0  # the SDK exporter's default timeout


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def _marker(n: int) -> bytes:
    """A trace id no other byte run of the request repeats: replaced by a fresh one per request."""
    return b"\xa5\x5a\xc3\x3c\x96\x69\x0f\xf0" + n.to_bytes(8, "big")


def _trace(n: int) -> list[Span]:
    trace, base = _marker(n), 1_700_000_000_000_000_000 + n * 10**9
    open_run = n % OPEN_RUN_EVERY == 0
    spans = []
    for i in range(1, SPANS_PER_TRACE + 1):
        if open_run:  # untagged tool calls of one run, held until it completes: it never does
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                     "gen_ai.tool.call.arguments": f'{{"order_id": "A{i}"}}', "gen_ai.tool.call.result": f"r{i}"}
            name, parent = "execute_tool lookup_order", (1).to_bytes(8, "big")
        else:
            attrs = {"http.request.method": "POST", "url.full": "https://api.example/v1/chat",
                     "http.response.status_code": 200, "app.step": i}
            name, parent = ("invoke_agent" if i == 1 else "POST"), (b"" if i == 1 else (1).to_bytes(8, "big"))
        spans.append(Span(trace_id=trace, span_id=(i + 1).to_bytes(8, "big"), parent_span_id=parent, name=name,
                          start_time_unix_nano=base + i * 1000, end_time_unix_nano=base + i * 1000 + 500,
                          attributes=[_kv(k, v) for k, v in attrs.items()]))
    return spans


def template() -> bytes:
    spans = [s for n in range(TRACES_PER_REQUEST) for s in _trace(n)]
    request = trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    return request.SerializeToString()


def fresh(data: bytes) -> bytes:
    for n in range(TRACES_PER_REQUEST):
        data = data.replace(_marker(n), os.urandom(16))
    return data


class CountingSink(trace_service_pb2_grpc.TraceServiceServicer):
    """A downstream that counts application spans (by id, so a duplicate shows) and finding spans."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.keys: set[bytes] = set()
        self.app_spans = 0
        self.loopguard_spans = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                  options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        with self._lock:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        if s.name.startswith("loopguard."):
                            self.loopguard_spans += 1
                        else:
                            self.app_spans += 1
                            self.keys.add(s.trace_id + s.span_id)
        return trace_service_pb2.ExportTraceServiceResponse()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def duplicates(self) -> int:
        with self._lock:
            return self.app_spans - len(self.keys)

    def stop(self) -> None:
        self.server.stop(0)


@dataclass
class FloodCounts:
    offered_requests: int = 0
    accepted_spans: int = 0
    unavailable: int = 0  # answers with RetryInfo (each retried)
    too_large: int = 0
    given_up_spans: int = 0  # batches the sender dropped after its deadline, as the SDK does
    other_errors: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def error(self, code: str) -> None:
        with self._lock:
            self.other_errors[code] = self.other_errors.get(code, 0) + 1


def _retry_delay(err: grpc.RpcError) -> Optional[float]:
    raw = dict(err.trailing_metadata() or ()).get("google.rpc.retryinfo-bin")
    if raw is None:
        return None
    info = error_details_pb2.RetryInfo.FromString(raw)
    return info.retry_delay.seconds + info.retry_delay.nanos / 1e9


def _send(stub: Any, data: bytes, counts: FloodCounts) -> None:
    deadline = time.monotonic() + SENDER_DEADLINE
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            counts.add(given_up_spans=SPANS_PER_REQUEST)
            return
        try:
            stub(data, timeout=remaining)
            counts.add(accepted_spans=SPANS_PER_REQUEST)
            return
        except grpc.RpcError as err:
            delay = _retry_delay(err) if err.code() == grpc.StatusCode.UNAVAILABLE else None
            if delay is None:
                if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    counts.add(too_large=1)
                elif err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    counts.add(given_up_spans=SPANS_PER_REQUEST)  # may have been taken: the sink's count says
                else:
                    counts.error(err.code().name)
                return
            counts.add(unavailable=1)
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))


def flood(address: str, seconds: float, senders: int = 8, rate: Optional[float] = None) -> FloodCounts:
    """`senders` threads send fresh requests for `seconds`, each as fast as it is answered, or at
    `rate` requests a second in all."""
    counts = FloodCounts()
    base = template()
    stop_at = time.monotonic() + seconds
    gap = senders / rate if rate else 0.0

    def sender() -> None:
        channel = grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)])
        stub = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                   request_serializer=None, response_deserializer=None)
        try:
            while time.monotonic() < stop_at:
                started = time.monotonic()
                counts.add(offered_requests=1)
                _send(stub, fresh(base), counts)
                if gap:
                    time.sleep(max(0.0, gap - (time.monotonic() - started)))
        finally:
            channel.close()

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + SENDER_DEADLINE + 30)
    return counts


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class RssSampler:
    """The receiver's resident memory, sampled every `every` seconds in a thread."""

    def __init__(self, pid: int, every: float = 0.25):
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._started = time.monotonic()
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.samples.append((time.monotonic() - self._started, rss_mib(self.pid)))
            except OSError:
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def peak(self) -> float:
        return max((r for _, r in self.samples), default=float("nan"))


def metric(port: int, name: str) -> float:
    """One value from the receiver's /metrics endpoint (plaintext, loopback)."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(f"otel_loopguard_{name} ") or line.startswith(f"otel_loopguard_{name}{{"):
                return float(line.split()[-1])
    return 0.0


@dataclass
class Burst:
    peak_mib: float  # resident memory, highest sample during the burst
    after_mib: float  # ... once everything accepted reached the sink and `quiet` seconds passed
    estimate_after: float  # the receiver's own estimate then (memory_estimate_bytes)


@dataclass
class Overload:
    """Overload runs, one after another: the floods, the sink's counts, the receiver's memory."""

    limit_mib: int
    baseline_mib: float
    bursts: list[Burst]
    counts: FloodCounts
    delivered: int
    duplicates: int
    runs_shed: float
    backpressure: float
    seconds: float
    samples: list[tuple[float, float]]

    @property
    def lost(self) -> int:
        return self.counts.accepted_spans - (self.delivered - self.duplicates)

    @property
    def peak_mib(self) -> float:
        return max(b.peak_mib for b in self.bursts)

    def row(self) -> dict[str, Any]:
        offered = self.counts.offered_requests * SPANS_PER_REQUEST
        return {"memory_limit_mib": self.limit_mib, "offered_spans": offered,
                "offered_spans_per_s": round(offered / self.seconds), "accepted": self.counts.accepted_spans,
                "delivered": self.delivered, "lost": self.lost, "duplicated": self.duplicates,
                "unavailable_answers": self.counts.unavailable, "given_up_by_senders": self.counts.given_up_spans,
                "runs_shed": int(self.runs_shed), "rss_baseline_mib": round(self.baseline_mib, 1),
                "rss_peak_mib": [round(b.peak_mib, 1) for b in self.bursts],
                "rss_after_mib": [round(b.after_mib, 1) for b in self.bursts],
                "estimate_after_mib": [round(b.estimate_after / 2**20, 1) for b in self.bursts]}


def overload(workdir: Path, env: dict[str, str], *, limit_mib: int, seconds: float, quiet: float, bursts: int = 2,
             senders: int = 8, args: tuple[str, ...] = ()) -> Overload:
    """Start a receiver with `--memory-limit-mib limit_mib`; `bursts` times, flood it for
    `seconds`, then let it be for `quiet` seconds after everything accepted reached the sink."""
    from live import ReceiverProcess, free_port, wait_until

    sink = CountingSink()
    metrics_port = free_port()
    receiver = ReceiverProcess(["--forward", sink.address, "--memory-limit-mib", str(limit_mib),
                                "--metrics-listen", f"127.0.0.1:{metrics_port}", "--idle-timeout-seconds", "5",
                                "--root-grace-seconds", "1", *args], env, workdir).start()
    counts = FloodCounts()
    done: list[Burst] = []
    try:
        assert receiver.proc is not None
        pid = receiver.proc.pid
        time.sleep(2)
        baseline = rss_mib(pid)
        all_samples: list[tuple[float, float]] = []
        for _ in range(bursts):
            sampler = RssSampler(pid)
            got = flood(receiver.address, seconds, senders)
            for name in ("offered_requests", "accepted_spans", "unavailable", "too_large", "given_up_spans"):
                counts.add(**{name: getattr(got, name)})
            wait_until(lambda: sink.app_spans >= counts.accepted_spans, 120, "accepted spans never all reached the sink",
                       explain=lambda: f"{sink.app_spans} of {counts.accepted_spans}")
            time.sleep(quiet)
            sampler.stop()
            all_samples += sampler.samples
            done.append(Burst(sampler.peak(), rss_mib(pid), metric(metrics_port, "memory_estimate_bytes")))
        return Overload(limit_mib, baseline, done, counts, sink.app_spans, sink.duplicates,
                        metric(metrics_port, "runs_shed_total"), metric(metrics_port, "backpressure_total"),
                        seconds * bursts, all_samples)
    finally:
        receiver.stop()
        sink.stop()
