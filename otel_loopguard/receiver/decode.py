"""One OTLP request -> compact per-span facts, reading only what matters.

Every span gives its ids, parent, times and a content summary (for dedupe).
Only spans whose attribute keys mark a tool or model call, or carry run facts,
get their attributes decoded. Invalid spans are rejected with a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ..calls import GuardEvent, ModelCall, RawCall
from ..conventions import ModelSpan, ToolSpan, recognise
from ..conventions import attributes as conv
from ..conventions.spec import MODEL_CONVENTIONS, TOOL_CONVENTIONS
from ..otlp.spans import DECISION_EVENT, run_id_of, span_call
from ..otlp.values import attributes
from ..otlp.lite import LiteRequest, decode_attributes

_MARKERS = frozenset(
    [c.marker for c in TOOL_CONVENTIONS]
    + [c.marker for c in MODEL_CONVENTIONS]
    + [conv.TOOL_NAME, conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE]
)
# Every attribute any convention or the contract reads; all others are never decoded.
_NEEDED = frozenset(
    _MARKERS
    | {k for c in TOOL_CONVENTIONS for k in (c.tool, *c.call_id, *c.arguments, *c.result)}
    | {k for c in MODEL_CONVENTIONS for k in (*c.model, *c.input_tokens, *c.output_tokens)}
    | {v for k, v in vars(conv).items() if k.isupper() and isinstance(v, str)}
    | {"error.type"}
)
_NEEDED_BYTES = frozenset(k.encode("utf-8") for k in _NEEDED)
_ERROR = Status.STATUS_CODE_ERROR
# Our own finding and run spans are never judged again (they carry loopguard.tool.name):
# a pipeline that routes them back through the receiver must not see loops made of findings.
_OWN_SPANS = frozenset({b"loopguard.finding", b"loopguard.run"})
_DECISION = DECISION_EVENT.encode()


def _without_guards(d: "Decoded") -> "Decoded":
    d.guards, d.run_id = None, None
    return d
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
    needed = _NEEDED_BYTES | {run_id_attribute.encode()} if run_id_attribute else _NEEDED_BYTES
    markers = _MARKERS | {run_id_attribute} if run_id_attribute else _MARKERS
    # Raw key bytes: a marker's bytes inside an attribute blob mean "decode this span".
    probes = _probe(markers) if _mentions_any(data, markers) else None
    out = DecodedRequest([], [])
    for r, rs in enumerate(request.resource_spans):
        for s, ss in enumerate(rs.scope_spans):
            for i, span in enumerate(ss.spans):
                trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
                if len(trace_id) != 16 or len(span_id) != 8 or len(parent) not in (0, 8) or _zero(trace_id, span_id):
                    out.rejected.append(((r, s, i), _why(span)))
                    continue
                out.spans.append(_decode_span((r, s, i), span, trace_id, span_id, parent, probes, needed, run_id_attribute))
    return out


def _mentions_any(data: bytes, markers: frozenset[str]) -> bool:
    return any(m.encode() in data for m in markers)


@lru_cache(maxsize=8)
def _probe(markers: frozenset[str]) -> "re.Pattern[bytes]":
    """One C-level search for any marker key, instead of one substring test per marker."""
    return re.compile(b"|".join(re.escape(m.encode()) for m in sorted(markers)))


def _guard_events(raw_events: Any) -> Optional[list[GuardEvent]]:
    """Guard decisions recorded as span events (docs/guard.md); None when there are none."""
    if _DECISION not in b"".join(raw_events):
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


def _decode_span(
    where: tuple[int, int, int],
    span: Any,
    trace_id: bytes,
    span_id: bytes,
    parent: bytes,
    probes: "Optional[re.Pattern[bytes]]",
    needed: frozenset[bytes],
    run_attr: Optional[str],
) -> Decoded:
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    raw = span.attributes
    # A re-delivery repeats times, parent and attributes exactly; another span does not.
    blob = b"".join(raw)
    d = Decoded(where, trace_id + span_id, hash((start, end, parent, blob)), trace_id, span_id, parent, start, end)
    if span.events:
        d.guards = _guard_events(span.events)
        if d.guards:
            d.run_id = run_id_of({}, trace_id, run_attr)  # refined below when attributes are read
    if probes is None or probes.search(blob) is None or span.name in _OWN_SPANS:
        return d if d.guards is None or span.name not in _OWN_SPANS else _without_guards(d)
    values = decode_attributes(raw, needed)
    found = recognise(values, span.status.code == _ERROR)
    if found is None and not (conv.TERMINATION_REASON in values or conv.TERMINAL_RESPONSE in values):
        return d
    d.run_id = run_id_of(values, trace_id, run_attr)
    if isinstance(found, ToolSpan):
        d.call = span_call(span, values, found)
    elif isinstance(found, ModelSpan):
        d.model = ModelCall(0, found.input_tokens, found.output_tokens, found.model, end)
    if conv.TERMINATION_REASON in values or conv.TERMINAL_RESPONSE in values:
        d.facts = {k: values[k] for k in (conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE) if k in values}
    return d
