"""Build OTLP inputs from REAL OpenTelemetry SDK spans (synthetic agents, fixed ids).

A scripted agent is a list of steps; each step is one model decision (a chat
span) followed by the tool calls it requested (one tool span each). The spans
are recorded by a real `TracerProvider` into an `InMemorySpanExporter`, then
encoded with the OTLP exporter's own `encode_spans`. Ids come from a seeded
generator and all times are explicit, so the output is reproducible.

Used by the tests in this folder and by tests/fixtures/make_fixtures.py.
(Named audit_agent_spans so it cannot clash with helpers of other test folders.)
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry import trace as trace_api
from opentelemetry.trace import Status, StatusCode

T0 = 1_700_000_000_000_000_000  # ns
MS = 1_000_000
STEP_NS = 100 * MS


@dataclass
class Tool:
    """One tool call: name, arguments and result (JSON-encoded into the span)."""

    name: str
    arguments: Any
    result: Any
    call_id: Optional[str] = None
    error: bool = False
    attributes: dict[str, Any] = field(default_factory=dict)  # e.g. loopguard.guard


class SeededIds(IdGenerator):
    def __init__(self, seed: int):
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=False)


def tool_attributes(convention: str, tool: Tool) -> dict[str, Any]:
    args, result = _json(tool.arguments), _json(tool.result)
    if convention == "gen_ai":
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.call.arguments": args,
            "gen_ai.tool.call.result": result,
        }
        if tool.call_id:
            attrs["gen_ai.tool.call.id"] = tool.call_id
    elif convention == "openinference":
        attrs = {
            "openinference.span.kind": "TOOL",
            "tool.name": tool.name,
            "input.value": args,
            "output.value": result,
        }
        if tool.call_id:
            attrs["tool_call.id"] = tool.call_id
    elif convention == "traceloop":
        attrs = {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": tool.name,
            "traceloop.entity.input": args,
            "traceloop.entity.output": result,
        }
        if tool.call_id:
            attrs["gen_ai.tool.call.id"] = tool.call_id
    else:  # pragma: no cover - test helper misuse
        raise ValueError(convention)
    attrs.update(tool.attributes)
    return attrs


def model_attributes(convention: str) -> dict[str, Any]:
    if convention == "gen_ai":
        return {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 12,
        }
    if convention == "openinference":
        return {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 120,
            "llm.token_count.completion": 12,
        }
    if convention == "traceloop":
        return {
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.prompt_tokens": 120,
            "gen_ai.usage.completion_tokens": 12,
        }
    raise ValueError(convention)  # pragma: no cover


def record_agent(
    steps: Sequence[Sequence[Tool]],
    *,
    convention: str = "gen_ai",
    seed: int = 1,
    service: str = "support-agent",
    root_attributes: Optional[dict[str, Any]] = None,
    unfinished_last: bool = False,
) -> list[ReadableSpan]:
    """Run a scripted agent under a real TracerProvider; returns the finished spans.

    Step i starts at T0 + i*100ms: a chat span (0-10ms), then its tool calls
    (each 5ms, starting 20ms, 30ms, ... into the step). With `unfinished_last`
    the last tool span is started but never ended (it is not exported).
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource({"service.name": service}),  # not .create(): no random instance id
        id_generator=SeededIds(seed),
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("loopguard.tests.scripted_agent", "1.0")
    end = T0 + len(steps) * STEP_NS + 50 * MS
    root = tracer.start_span("invoke_agent support", start_time=T0, attributes=root_attributes or {})
    ctx = trace_api.set_span_in_context(root)
    for i, tools in enumerate(steps):
        base = T0 + i * STEP_NS + MS
        chat = tracer.start_span("chat gpt-4o-mini", context=ctx, start_time=base, attributes=model_attributes(convention))
        chat.end(end_time=base + 10 * MS)
        for j, tool in enumerate(tools):
            start = base + (20 + 10 * j) * MS
            span = tracer.start_span(
                f"execute_tool {tool.name}", context=ctx, start_time=start, attributes=tool_attributes(convention, tool)
            )
            if tool.error:
                span.set_status(Status(StatusCode.ERROR, "tool failed"))
            last = i == len(steps) - 1 and j == len(tools) - 1
            if not (unfinished_last and last):
                span.end(end_time=start + 5 * MS)
    root.end(end_time=end)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def to_request(spans: Iterable[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(list(spans))


def trace_id_hex(spans: Sequence[ReadableSpan]) -> str:
    return format(spans[0].context.trace_id, "032x")


# --- the three file formats -------------------------------------------------------------

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids(x) for x in node]
    return node


def otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON: the protobuf JSON mapping, with trace/span ids as hex (not base64)."""
    return _hex_ids(MessageToDict(request))


def write_pb(path: Path, *requests: ExportTraceServiceRequest) -> Path:
    merged = ExportTraceServiceRequest()
    for r in requests:
        merged.MergeFrom(r)
    path.write_bytes(merged.SerializeToString())
    return path


def write_otlp_json(path: Path, request: ExportTraceServiceRequest) -> Path:
    path.write_text(json.dumps(otlp_json(request), indent=2) + "\n", encoding="utf-8")
    return path


def write_otlp_ndjson(path: Path, *requests: ExportTraceServiceRequest) -> Path:
    """One OTLP/JSON request a line, as the Collector's file exporter writes."""
    path.write_text("".join(json.dumps(otlp_json(r)) + "\n" for r in requests), encoding="utf-8")
    return path


def shuffled(request: ExportTraceServiceRequest, seed: int) -> ExportTraceServiceRequest:
    """The same request with the spans of every scope in a shuffled order."""
    out = ExportTraceServiceRequest()
    out.CopyFrom(request)
    rng = random.Random(seed)
    for rs in out.resource_spans:
        for ss in rs.scope_spans:
            spans = list(ss.spans)
            copies = []
            for s in spans:
                c = type(s)()
                c.CopyFrom(s)
                copies.append(c)
            rng.shuffle(copies)
            del ss.spans[:]
            ss.spans.extend(copies)
    return out


# --- a few scripted agents ----------------------------------------------------------------

ORDER_ARGS = {"order_id": "A12", "include_items": True}
ORDER_RESULT = {"status": "delivered", "version": 7}


def looping_agent(n: int = 6) -> list[list[Tool]]:
    """lookup_order(A12) n times in n decisions, the same delivered/7 answer each time."""
    return [[Tool("lookup_order", ORDER_ARGS, ORDER_RESULT, call_id=f"call_{i:02d}")] for i in range(1, n + 1)]


def healthy_agent() -> list[list[Tool]]:
    """Pagination with new cursors and new items, then a lookup: nothing to flag."""
    return [
        [Tool("search_cases", {"query": "refund", "cursor": None}, {"items": [{"id": "case-1"}], "next": "p2"}, "c1")],
        [Tool("search_cases", {"query": "refund", "cursor": "p2"}, {"items": [{"id": "case-2"}], "next": None}, "c2")],
        [Tool("lookup_order", ORDER_ARGS, ORDER_RESULT, "c3")],
    ]
