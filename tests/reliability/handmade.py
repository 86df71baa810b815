"""Untagged agent spans built by hand (no processor: no loopguard.seq), with real start times,
for runs a test cuts in two at a chosen call."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

MS = 1_000_000


def _kv(key: str, value: Any) -> KeyValue:
    v = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=str(value))
    return KeyValue(key=key, value=v)


class Run:
    """One agent run of tool calls under a root span; `looping`: the same lookup, the same result."""

    def __init__(self, looping: bool = True) -> None:
        self.trace_id, self.root_id = os.urandom(16), os.urandom(8)
        self.looping = looping
        self.start = time.time_ns()
        self.calls: list[Span] = []

    @property
    def run_id(self) -> str:
        return self.trace_id.hex()

    def call(self, i: int) -> Span:
        """Call i (1-based), started i ms after the run began (all before now)."""
        args = {"order_id": "A1"} if self.looping else {"order_id": f"A1-{i}"}
        result = {"status": "delivered"} if self.looping else {"status": "delivered", "order_id": f"A1-{i}"}
        start = self.start + i * MS
        span = Span(trace_id=self.trace_id, span_id=os.urandom(8), parent_span_id=self.root_id,
                    name="execute_tool lookup_order", kind=Span.SPAN_KIND_INTERNAL,
                    start_time_unix_nano=start, end_time_unix_nano=start + MS // 2)
        span.attributes.extend([_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", "lookup_order"),
                                _kv("gen_ai.tool.call.id", f"call_{i}"),
                                _kv("gen_ai.tool.call.arguments", json.dumps(args)),
                                _kv("gen_ai.tool.call.result", json.dumps(result))])
        return span

    def root(self) -> Span:
        return Span(trace_id=self.trace_id, span_id=self.root_id, name="invoke_agent support",
                    kind=Span.SPAN_KIND_INTERNAL, start_time_unix_nano=self.start,
                    end_time_unix_nano=max(time.time_ns(), self.start + 100 * MS))


def request(spans: list[Span]) -> bytes:
    resource = Resource(attributes=[_kv("service.name", "hand-made-agent")])
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=resource, scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString()


def many(n: int, spans_each: int = 20) -> list[bytes]:
    """n requests of distinct healthy spans (for counting delivery, not for judging)."""
    out = []
    for _ in range(n):
        run = Run(looping=False)
        out.append(request([run.call(i) for i in range(1, spans_each + 1)]))
    return out
