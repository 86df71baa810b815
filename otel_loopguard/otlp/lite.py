"""A reduced view of ExportTraceServiceRequest for the receiver's hot path.

The same wire format, declared differently so protobuf's C parser does the work:
- the whole request is parsed in one call (spans included): a call per span
  costs more than the parse itself for the small spans most traces carry;
- a span's attributes are declared as a map from key to AnyValue (the map entry
  and KeyValue share field numbers), so "is this key here" and "its value" are
  C-level lookups, and only the few attributes that matter are ever read;
- every other Span field is declared too (as bytes or integers, never read), so a span
  normally has no unknown fields: upb moves a KeyValue it cannot fit in the map (one
  with a field newer than ours) to the span's unknown fields, and `hidden_attributes`
  spots that for a full parse to read instead.
"""

from __future__ import annotations

from typing import Any, Iterable

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.common.v1 import common_pb2

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "otel_loopguard.lite"
_ANY_VALUE = ".opentelemetry.proto.common.v1.AnyValue"


def _message(
    parent: Any, name: str, fields: Iterable[tuple[str, int, int, int, str]]
) -> descriptor_pb2.DescriptorProto:
    msg = parent.add(name=name)
    for fname, number, ftype, label, type_name in fields:
        field = msg.field.add(name=fname, number=number, type=ftype, label=label)
        if type_name:
            field.type_name = type_name
    return msg


def _build() -> tuple[Any, Any]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(common_pb2.DESCRIPTOR.serialized_pb))
    file = descriptor_pb2.FileDescriptorProto(
        name="otel_loopguard_lite.proto", package=_PACKAGE, syntax="proto3",
        dependency=[common_pb2.DESCRIPTOR.name],
    )
    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    _message(file.message_type, "Status", [("code", 3, _F.TYPE_INT32, opt, "")])
    span = _message(
        file.message_type,
        "Span",
        [
            ("trace_id", 1, _F.TYPE_BYTES, opt, ""),
            ("span_id", 2, _F.TYPE_BYTES, opt, ""),
            ("trace_state", 3, _F.TYPE_BYTES, opt, ""),
            ("parent_span_id", 4, _F.TYPE_BYTES, opt, ""),
            ("name", 5, _F.TYPE_BYTES, opt, ""),
            ("kind", 6, _F.TYPE_INT32, opt, ""),
            ("start_time_unix_nano", 7, _F.TYPE_FIXED64, opt, ""),
            ("end_time_unix_nano", 8, _F.TYPE_FIXED64, opt, ""),
            ("attributes", 9, _F.TYPE_MESSAGE, rep, f".{_PACKAGE}.Span.AttributesEntry"),
            ("dropped_attributes_count", 10, _F.TYPE_UINT32, opt, ""),
            ("events", 11, _F.TYPE_BYTES, rep, ""),  # raw Span.Event bytes: guard decisions
            ("dropped_events_count", 12, _F.TYPE_UINT32, opt, ""),
            ("links", 13, _F.TYPE_BYTES, rep, ""),
            ("dropped_links_count", 14, _F.TYPE_UINT32, opt, ""),
            ("status", 15, _F.TYPE_MESSAGE, opt, f".{_PACKAGE}.Status"),
            ("flags", 16, _F.TYPE_FIXED32, opt, ""),
        ],
    )
    entry = _message(span.nested_type, "AttributesEntry", [
        ("key", 1, _F.TYPE_STRING, opt, ""), ("value", 2, _F.TYPE_MESSAGE, opt, _ANY_VALUE)])
    entry.options.map_entry = True
    _message(file.message_type, "ScopeSpans", [("spans", 2, _F.TYPE_MESSAGE, rep, f".{_PACKAGE}.Span")])
    _message(file.message_type, "ResourceSpans", [("scope_spans", 2, _F.TYPE_MESSAGE, rep, f".{_PACKAGE}.ScopeSpans")])
    _message(file.message_type, "Request", [("resource_spans", 1, _F.TYPE_MESSAGE, rep, f".{_PACKAGE}.ResourceSpans")])
    # The same request with each span left as its bytes, for the rare span the map view
    # cannot show whole (hidden_attributes): read again in wire order by the full schema.
    _message(file.message_type, "RawScopeSpans", [("spans", 2, _F.TYPE_BYTES, rep, "")])
    _message(file.message_type, "RawResourceSpans", [("scope_spans", 2, _F.TYPE_MESSAGE, rep, f".{_PACKAGE}.RawScopeSpans")])
    _message(file.message_type, "RawRequest", [("resource_spans", 1, _F.TYPE_MESSAGE, rep, f".{_PACKAGE}.RawResourceSpans")])
    pool.Add(file)

    def cls(name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))

    return cls("Request"), cls("Span"), cls("RawRequest")


LiteRequest, LiteSpan, RawSpansRequest = _build()
_ATTRIBUTES = 9


def status_code(span: Any) -> int:
    """span.status.code, without making a Status object for the many spans that carry none."""
    return span.status.code if span.HasField("status") else 0


def hidden_attributes(span: Any) -> bool:
    """True when some KeyValue of the span did not make it into the attribute map."""
    fields = UnknownFieldSet(span)
    return len(fields) > 0 and any(f.field_number == _ATTRIBUTES for f in fields)
