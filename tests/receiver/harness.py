"""Real gRPC pieces for receiver tests: a downstream sink and a receiver in a thread."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent import futures
from dataclasses import replace
from typing import Any, Callable, Optional

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from otel_loopguard.receiver.config import ReceiverConfig
from otel_loopguard.receiver.server import Running, start


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    """A downstream OTLP endpoint that records every request; can be switched off."""

    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.down = False
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
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
        self.call(self.running.stop(grace=5.0))
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
