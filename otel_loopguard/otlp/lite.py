"""A reduced view of ExportTraceServiceRequest for the receiver's hot path.

The same wire format, but a span's attributes stay raw bytes and fields the
receiver never reads are not declared (protobuf skips them without building
objects). One C-level join per span then tells whether any attribute key we
care about is present; only those spans get their attributes decoded.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from .values import any_value

_F = descriptor_pb2.FieldDescriptorProto


def _message(file: descriptor_pb2.FileDescriptorProto, name: str, fields: Iterable[tuple[str, int, int, int, str]]) -> None:
    msg = file.message_type.add(name=name)
    for fname, number, ftype, label, type_name in fields:
        field = msg.field.add(name=fname, number=number, type=ftype, label=label)
        if type_name:
            field.type_name = type_name


def _build() -> Any:
    file = descriptor_pb2.FileDescriptorProto(name="otel_loopguard_lite.proto", package="otel_loopguard.lite", syntax="proto3")
    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    _message(file, "Status", [("code", 3, _F.TYPE_INT32, opt, "")])
    _message(
        file,
        "Span",
        [
            ("trace_id", 1, _F.TYPE_BYTES, opt, ""),
            ("span_id", 2, _F.TYPE_BYTES, opt, ""),
            ("parent_span_id", 4, _F.TYPE_BYTES, opt, ""),
            ("name", 5, _F.TYPE_BYTES, opt, ""),
            ("start_time_unix_nano", 7, _F.TYPE_FIXED64, opt, ""),
            ("end_time_unix_nano", 8, _F.TYPE_FIXED64, opt, ""),
            ("attributes", 9, _F.TYPE_BYTES, rep, ""),
            ("events", 11, _F.TYPE_BYTES, rep, ""),  # raw Span.Event bytes: guard decisions
            ("status", 15, _F.TYPE_MESSAGE, opt, ".otel_loopguard.lite.Status"),
        ],
    )
    _message(file, "ScopeSpans", [("spans", 2, _F.TYPE_MESSAGE, rep, ".otel_loopguard.lite.Span")])
    _message(file, "ResourceSpans", [("scope_spans", 2, _F.TYPE_MESSAGE, rep, ".otel_loopguard.lite.ScopeSpans")])
    _message(file, "Request", [("resource_spans", 1, _F.TYPE_MESSAGE, rep, ".otel_loopguard.lite.ResourceSpans")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("otel_loopguard.lite.Request"))


LiteRequest = _build()


def decode_attributes(raw: Iterable[bytes], keep: frozenset[bytes]) -> dict[str, Any]:
    """Decode only the raw KeyValues whose key (as UTF-8 bytes) is in `keep`.

    Scalar values in the usual field order are read straight from the bytes;
    anything else (arrays, maps, unusual layouts, damaged bytes) goes through the
    real protobuf parser, which validates it.
    """
    out: dict[str, Any] = {}
    for item in raw:
        if len(item) > 2 and item[0] == 0x0A and item[1] < 0x80:
            end = 2 + item[1]
            if item[2:end] not in keep:
                continue
            value = _scalar(item, end)
            if value is not _SLOW:
                out[item[2:end].decode("utf-8")] = value
                continue
        kv = KeyValue.FromString(item)
        if kv.key.encode("utf-8") in keep:
            out[kv.key] = any_value(kv.value)
    return out


_SLOW = object()
_DOUBLE = struct.Struct("<d")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return result, pos
        shift += 7


def _scalar(item: bytes, pos: int) -> Any:
    """The AnyValue after the key, when it is a plain scalar; _SLOW otherwise."""
    try:
        if pos == len(item):
            return None  # no value at all
        if item[pos] != 0x12:
            return _SLOW
        length, pos = _varint(item, pos + 1)
        if pos + length != len(item):
            return _SLOW
        if length == 0:
            return None
        tag = item[pos]
        if tag == 0x0A:  # string_value
            size, start = _varint(item, pos + 1)
            return item[start : start + size].decode("utf-8") if start + size == len(item) else _SLOW
        if tag == 0x10 and pos + 2 == len(item):  # bool_value
            return item[pos + 1] != 0
        if tag == 0x18:  # int_value (two's complement varint)
            value, end = _varint(item, pos + 1)
            if end != len(item):
                return _SLOW
            return value - (1 << 64) if value >= 1 << 63 else value
        if tag == 0x21 and pos + 9 == len(item):  # double_value
            return _DOUBLE.unpack_from(item, pos + 1)[0]
    except (IndexError, UnicodeDecodeError):
        pass
    return _SLOW
