"""One OTLP request -> compact per-span facts, reading only what matters.

Every span gives its ids, parent, times and a content id (for dedupe). Only
spans whose marker attributes say "tool call", "model call" or "run facts" get
the attributes the conventions read decoded; every other attribute of every
span is never touched. Invalid spans are rejected with a reason.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ..calls import GuardEvent, ModelCall, RawCall
from ..conventions import ModelSpan, ToolSpan, recognise
from ..conventions import attributes as conv
from ..conventions.spec import MODEL_CONVENTIONS, TOOL_CONVENTIONS
from ..otlp.lite import LiteRequest, LiteSpan, hidden_attributes
from ..otlp.spans import DECISION_EVENT, run_id_of, span_call
from ..otlp.values import any_value, attributes


_log = logging.getLogger("otel_loopguard.receiver")
_TOOL, _MODEL, _FACTS = 1, 2, 3


def _marker_kinds() -> dict[str, dict[str, int]]:
    """marker key -> {marker value -> tool or model}; tool conventions win, as in recognise()."""
    out: dict[str, dict[str, int]] = {}
    for convs, kind in ((MODEL_CONVENTIONS, _MODEL), (TOOL_CONVENTIONS, _TOOL)):
        for c in convs:
            out.setdefault(c.marker, {}).update(dict.fromkeys(c.marker_values, kind))
    return out


_MARKERS = tuple(_marker_kinds().items())
_RUN_KEYS = (conv.RUN_ID, conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE)
_MARKER_KEYS = tuple(c.marker for c in (*TOOL_CONVENTIONS, *MODEL_CONVENTIONS))
# What recognise() and span_call() read for each kind of span; no other attribute is decoded,
# so a span's cost does not grow with its attribute count (LLM spans carry hundreds).
_KEYS = {
    _TOOL: tuple(dict.fromkeys([
        *_MARKER_KEYS, *_RUN_KEYS,
        *(k for c in TOOL_CONVENTIONS for k in (c.tool, *c.call_id, *c.arguments, *c.result)),
        *(v for k, v in vars(conv).items() if k.isupper() and isinstance(v, str)),
        "error.type", "gen_ai.tool.name", "traceloop.entity.name", "tool.name",
    ])),
    _MODEL: tuple(dict.fromkeys([
        *_MARKER_KEYS, *_RUN_KEYS,
        *(k for c in MODEL_CONVENTIONS for k in (*c.model, *c.input_tokens, *c.output_tokens)),
    ])),
    _FACTS: _RUN_KEYS,
}
# Any of these present makes a span worth a closer look (markers, a tagged tool, run facts).
_ANY_KEYS = tuple(dict.fromkeys([*(k for k, _ in _MARKERS), conv.TOOL_NAME, conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE]))
_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value", "bytes_value"})
_ERROR = Status.STATUS_CODE_ERROR
# Our own finding and run spans are never judged again (they carry loopguard.tool.name):
# a pipeline that routes them back through the receiver must not see loops made of findings.
_OWN_SPANS = frozenset({b"loopguard.finding", b"loopguard.run"})
_DECISION = DECISION_EVENT.encode()
_ZERO_TRACE, _ZERO_SPAN = b"\x00" * 16, b"\x00" * 8


@dataclass(slots=True)
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
    guards: Optional[list[GuardEvent]] = None


@dataclass
class DecodedRequest:
    spans: list[Decoded]
    rejected: list[tuple[tuple[int, int, int], str]]  # where, why


def decode(data: bytes, run_id_attribute: Optional[str] = None) -> DecodedRequest:
    """Decode request bytes; raises DecodeError for bytes that are not a request."""
    request = LiteRequest.FromString(data)
    extra = (run_id_attribute,) if run_id_attribute else ()
    out = DecodedRequest([], [])
    for r, rs in enumerate(request.resource_spans):
        for s, ss in enumerate(rs.scope_spans):
            for i, raw in enumerate(ss.spans):
                span = LiteSpan.FromString(raw)
                trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
                if len(trace_id) != 16 or len(span_id) != 8 or len(parent) not in (0, 8) or _zero(trace_id, span_id):
                    out.rejected.append(((r, s, i), _why(span)))
                    continue
                d = Decoded((r, s, i), trace_id + span_id, 0, trace_id, span_id, parent,
                            span.start_time_unix_nano, span.end_time_unix_nano)
                out.spans.append(_read_guarded(d, span, raw, extra, run_id_attribute))
    return out


def _read_guarded(d: Decoded, span: Any, raw: bytes, extra: tuple[str, ...], run_attr: Optional[str]) -> Decoded:
    """Read what a span says; a span we cannot make sense of is passed on unjudged, never
    allowed to cost the rest of its request (or the request an answer)."""
    try:
        attrs = _full_attributes(raw) if hidden_attributes(span) else span.attributes
        return _read_span(d, span, attrs, extra, run_attr)
    except Exception:
        _log.exception("span %s of trace %s could not be read; forwarded, not judged", d.span_id.hex(), d.trace_id.hex())
        d.content = hash(raw)
        d.run_id = d.call = d.model = d.facts = d.guards = None
        return d


def _full_attributes(raw: bytes) -> dict[str, Any]:
    """Attributes as the full schema parses them: for a span whose KeyValues carry fields
    newer than ours (the map view would hide them). Last one wins, as in the map."""
    return {kv.key: kv.value for kv in Span.FromString(raw).attributes}


def _guard_events(raw_events: Any) -> Optional[list[GuardEvent]]:
    """Guard decisions recorded as span events (docs/guard.md); None when there are none."""
    if not any(_DECISION in raw for raw in raw_events):
        return None
    out = []
    for raw in raw_events:
        event = Span.Event.FromString(raw)
        if event.name != DECISION_EVENT:
            continue
        e = attributes(event.attributes)
        if e.get("loopguard.decision") in ("deny", "would_block") and "loopguard.dispatched" in e:
            kind, tool = e.get("loopguard.finding.kind"), e.get("loopguard.tool.name")
            out.append(GuardEvent(event.time_unix_nano, str(kind) if kind else None,
                                  bool(e["loopguard.dispatched"]), str(tool) if tool else None))
    return out or None


def _zero(trace_id: bytes, span_id: bytes) -> bool:
    return trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN


def _why(span: Any) -> str:
    name = span.name.decode("utf-8", "replace")
    if len(span.trace_id) != 16 or span.trace_id == _ZERO_TRACE:
        return f"span {name!r}: trace_id must be 16 non-zero bytes (got {len(span.trace_id)})"
    if len(span.span_id) != 8 or span.span_id == _ZERO_SPAN:
        return f"span {name!r}: span_id must be 8 non-zero bytes (got {len(span.span_id)})"
    return f"span {name!r}: parent_span_id must be empty or 8 bytes (got {len(span.parent_span_id)})"


def _kind(attrs: Any) -> Optional[int]:
    """Tool, model or run facts, from C-level map lookups only; None for every other span.
    Same precedence as recognise(): any tool marker, then a tagged tool, then a model."""
    for key in _ANY_KEYS:  # most spans carry none of them: settled in a few lookups
        if key in attrs:
            break
    else:
        return None
    found = None
    for key, kinds in _MARKERS:
        value = attrs.get(key)
        if value is not None:
            kind = kinds.get(value.string_value)
            if kind == _TOOL:
                return kind
            found = found or kind
    if conv.TOOL_NAME in attrs:
        return _TOOL
    if found is None and (conv.TERMINATION_REASON in attrs or conv.TERMINAL_RESPONSE in attrs):
        return _FACTS
    return found


def _values(attrs: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        if key in attrs:
            value = attrs[key]
            which = value.WhichOneof("value")
            out[key] = getattr(value, which) if which in _SCALARS else any_value(value)
    return out


def _read_span(d: Decoded, span: Any, attrs: Any, extra: tuple[str, ...], run_attr: Optional[str]) -> Decoded:
    own = span.name in _OWN_SPANS
    status = span.status.code
    # Content id for dedupe: what a re-delivery repeats even through another encoder
    # (which may write empty fields or order them differently), so it is a duplicate,
    # while a different span under the same id is a conflict.
    d.content = hash((d.start, d.end, d.parent, span.name, status, len(attrs)))
    if span.events and not own:
        d.guards = _guard_events(span.events)
        if d.guards:
            # The same run as the audit puts them in: loopguard.run.id or the configured attribute.
            d.run_id = run_id_of(_values(attrs, (conv.RUN_ID, *((run_attr,) if run_attr else ()))), d.trace_id, run_attr)
    kind = None if own else _kind(attrs)
    if kind is None:
        return d
    values = _values(attrs, _KEYS[kind] + extra)
    d.content = hash((d.content, repr(values)))  # the attributes judged are part of what must match
    found = recognise(values, status == _ERROR)
    if found is None and not (conv.TERMINATION_REASON in values or conv.TERMINAL_RESPONSE in values):
        return d
    d.run_id = run_id_of(values, d.trace_id, run_attr)
    if isinstance(found, ToolSpan):
        d.call = span_call(span, values, found)
    elif isinstance(found, ModelSpan):
        d.model = ModelCall(0, found.input_tokens, found.output_tokens, found.model, d.end)
    if conv.TERMINATION_REASON in values or conv.TERMINAL_RESPONSE in values:
        d.facts = {k: values[k] for k in (conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE) if k in values}
    return d
