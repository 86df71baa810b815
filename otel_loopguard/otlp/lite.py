"""A view of ExportTraceServiceRequest for the receiver's hot path: one parse that
validates the whole request and leaves only the reading of a few values to Python.

The schema is trace.proto itself (copied from the installed opentelemetry-proto at
import, under another package name), with one change: a span's attributes are declared
as a map from key to AnyValue. The map entry and KeyValue share field numbers, so the
wire format is the same, and "is this key here" and "its value" become C-level lookups:
only the few attributes that matter are ever read.

Every other field keeps its type, so this parse refuses exactly what the full one
refuses (strings that are not UTF-8 anywhere in the request, truncated messages), and a
full parse is needed only to cut a filtered copy. upb moves a KeyValue it cannot fit in
the map (one with a field newer than ours) to the span's unknown fields;
`hidden_attributes` spots that, and the decoder then reads that span's own bytes
(`RawSpansRequest`: the same request with each span left as bytes) with the full schema.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "otel_loopguard.lite"
_TRACE = "." + trace_pb2.DESCRIPTOR.package
_ANY_VALUE = ".opentelemetry.proto.common.v1.AnyValue"
_ATTRIBUTES = 9  # Span.attributes


def _renamed(message: descriptor_pb2.DescriptorProto) -> None:
    """Point every reference to a trace.proto type at our copy of it."""
    for field in message.field:
        if field.type_name.startswith(_TRACE + "."):
            field.type_name = f".{_PACKAGE}{field.type_name[len(_TRACE):]}"
    for nested in message.nested_type:
        _renamed(nested)


def _mapped_attributes(span: descriptor_pb2.DescriptorProto) -> None:
    entry = span.nested_type.add(name="AttributesEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL, type_name=_ANY_VALUE)
    (field,) = (f for f in span.field if f.number == _ATTRIBUTES)
    field.type_name = f".{_PACKAGE}.Span.AttributesEntry"


def _raw_spans_request(file: descriptor_pb2.FileDescriptorProto) -> None:
    """RawRequest > RawResourceSpans > RawScopeSpans.spans as bytes (what is not declared
    is skipped: only the spans' own bytes are wanted)."""
    rep, msg = _F.LABEL_REPEATED, _F.TYPE_MESSAGE
    scope = file.message_type.add(name="RawScopeSpans")
    scope.field.add(name="spans", number=2, type=_F.TYPE_BYTES, label=rep)
    resource = file.message_type.add(name="RawResourceSpans")
    resource.field.add(name="scope_spans", number=2, type=msg, label=rep, type_name=f".{_PACKAGE}.RawScopeSpans")
    request = file.message_type.add(name="RawRequest")
    request.field.add(name="resource_spans", number=1, type=msg, label=rep, type_name=f".{_PACKAGE}.RawResourceSpans")


def _build() -> tuple[Any, Any, Any]:
    pool = descriptor_pool.DescriptorPool()
    for dependency in (common_pb2, resource_pb2):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(dependency.DESCRIPTOR.serialized_pb))
    file = descriptor_pb2.FileDescriptorProto.FromString(trace_pb2.DESCRIPTOR.serialized_pb)
    file.name, file.package = "otel_loopguard_lite.proto", _PACKAGE
    file.ClearField("options")
    for message in file.message_type:
        _renamed(message)
        if message.name == "Span":
            _mapped_attributes(message)
    # TracesData has ExportTraceServiceRequest's one field (resource_spans = 1): the request.
    _raw_spans_request(file)
    pool.Add(file)

    def cls(name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))

    return cls("TracesData"), cls("Span"), cls("RawRequest")


LiteRequest, LiteSpan, RawSpansRequest = _build()


def status_code(span: Any) -> int:
    """span.status.code, without making a Status object for the many spans that carry none."""
    return span.status.code if span.HasField("status") else 0


def hidden_attributes(span: Any) -> bool:
    """True when some KeyValue of the span did not make it into the attribute map."""
    fields = UnknownFieldSet(span)
    return len(fields) > 0 and any(f.field_number == _ATTRIBUTES for f in fields)
