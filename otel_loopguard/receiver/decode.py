"""One OTLP request -> compact per-span facts, reading only what matters.

Every span gives its ids, parent, times and a content summary (for dedupe).
Only spans whose attribute keys mark a tool or model call, or carry run facts,
get their attributes decoded. Invalid spans are rejected with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ..calls import ModelCall, RawCall
from ..conventions import ModelSpan, ToolSpan, recognise
from ..conventions import attributes as conv
from ..conventions.spec import MODEL_CONVENTIONS, TOOL_CONVENTIONS
from ..otlp.spans import span_call
from ..otlp.values import attributes
from .dedupe import content_of

_MARKERS = frozenset(
    [c.marker for c in TOOL_CONVENTIONS]
    + [c.marker for c in MODEL_CONVENTIONS]
    + [conv.TOOL_NAME, conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE]
)
_ERROR = Status.STATUS_CODE_ERROR
_ZERO_TRACE, _ZERO_SPAN = b"\x00" * 16, b"\x00" * 8


@dataclass
class Decoded:
    where: tuple[int, int, int]  # resource, scope, span index in the request
    key: bytes  # trace id + span id
    content: int
    trace_id: bytes
    span_id: bytes
    parent: bytes
    start: int
    end: int
    run_id: Optional[str] = None
    call: Optional[RawCall] = None
    model: Optional[ModelCall] = None
    facts: Optional[dict[str, Any]] = None


@dataclass
class DecodedRequest:
    spans: list[Decoded]
    rejected: list[tuple[tuple[int, int, int], str]]  # where, why


def decode(request: ExportTraceServiceRequest, run_id_attribute: Optional[str] = None) -> DecodedRequest:
    markers = _MARKERS | {run_id_attribute} if run_id_attribute else _MARKERS
    out = DecodedRequest([], [])
    for r, rs in enumerate(request.resource_spans):
        for s, ss in enumerate(rs.scope_spans):
            for i, span in enumerate(ss.spans):
                where = (r, s, i)
                problem = _invalid(span)
                if problem:
                    out.rejected.append((where, problem))
                else:
                    out.spans.append(_decode_span(where, span, markers, run_id_attribute))
    return out


def _invalid(span: Span) -> Optional[str]:
    if len(span.trace_id) != 16 or span.trace_id == _ZERO_TRACE:
        return f"span {span.name!r}: trace_id must be 16 non-zero bytes (got {len(span.trace_id)})"
    if len(span.span_id) != 8 or span.span_id == _ZERO_SPAN:
        return f"span {span.name!r}: span_id must be 8 non-zero bytes (got {len(span.span_id)})"
    if span.parent_span_id and len(span.parent_span_id) != 8:
        return f"span {span.name!r}: parent_span_id must be empty or 8 bytes (got {len(span.parent_span_id)})"
    return None


def _decode_span(where: tuple[int, int, int], span: Span, markers: frozenset[str], run_attr: Optional[str]) -> Decoded:
    kvs = span.attributes
    status = span.status.code
    d = Decoded(
        where=where,
        key=span.trace_id + span.span_id,
        content=content_of(span.name, span.start_time_unix_nano, span.end_time_unix_nano, len(kvs), status, span.parent_span_id),
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent=span.parent_span_id,
        start=span.start_time_unix_nano,
        end=span.end_time_unix_nano,
    )
    if not any(kv.key in markers for kv in kvs):
        return d
    attrs = attributes(kvs)
    found = recognise(attrs, status == _ERROR)
    run_id = attrs.get(conv.RUN_ID) or (attrs.get(run_attr) if run_attr else None)
    d.run_id = str(run_id) if run_id else span.trace_id.hex()
    if isinstance(found, ToolSpan):
        d.call = span_call(span, attrs, found)
    elif isinstance(found, ModelSpan):
        d.model = ModelCall(0, found.input_tokens, found.output_tokens, found.model, span.end_time_unix_nano)
    if conv.TERMINATION_REASON in attrs or conv.TERMINAL_RESPONSE in attrs:
        d.facts = {k: attrs[k] for k in (conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE) if k in attrs}
    return d
