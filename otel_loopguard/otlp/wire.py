"""Hand-encoded OTLP fragments for the spans the receiver writes (findings, run summaries).

Filling a protobuf Span one KeyValue object at a time costs microseconds per
attribute in Python; encoding the same fields as bytes and merging them in one
C-level parse is several times cheaper. Only the few message shapes our own
spans use are covered: attributes, events with attributes, links.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, Mapping

_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")
_U64 = (1 << 64) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1  # an int beyond int64 is written as its text

# Field tags (field number << 3 | wire type) of opentelemetry.proto.trace.v1 / common.v1.
SPAN_ATTRIBUTE = 0x4A  # Span.attributes = 9
SPAN_EVENT = 0x5A  # Span.events = 11
SPAN_LINK = 0x6A  # Span.links = 13
EVENT_ATTRIBUTE = 0x1A  # Span.Event.attributes = 3


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (every tag used here fits one byte)."""
    n = len(payload)
    return (bytes((tag, n)) if n < 0x80 else bytes((tag,)) + _varint(n)) + payload


@lru_cache(maxsize=1024)
def _key(key: str) -> bytes:
    """KeyValue.key, encoded once: our spans reuse a few dozen keys."""
    return _field(0x0A, key.encode("utf-8", "replace"))


def any_value(v: Any) -> bytes:
    """AnyValue: string 1, bool 2, int 3, double 4, array 5 (ArrayValue.values = 1)."""
    if isinstance(v, bool):
        return b"\x10\x01" if v else b"\x10\x00"
    if isinstance(v, int) and _I64_MIN <= v <= _I64_MAX:
        return b"\x18" + _varint(v & _U64)  # int64 as two's complement, like protobuf
    if isinstance(v, float):
        return b"\x21" + _DOUBLE.pack(v)
    if isinstance(v, (list, tuple)):
        return _field(0x2A, b"".join(_field(0x0A, any_value(x)) for x in v))
    return _field(0x0A, str(v).encode("utf-8", "replace"))


def attributes(values: Mapping[str, Any], tag: int) -> bytes:
    """KeyValues (key 1, value 2) as repeated field `tag` of the enclosing message."""
    return b"".join(
        _pair(tag, k, v) if _cacheable(v) else _field(tag, _key(k) + _field(0x12, any_value(v)))
        for k, v in values.items()
    )


MAX_CACHED_CHARS = 256  # run ids and tool names come from telemetry: long ones are not kept


def _cacheable(v: Any) -> bool:
    """Ints, bools and short strings. Not floats: 0.0 and -0.0 are one cache key."""
    t = v.__class__
    return t is bool or t is int or (t is str and len(v) <= MAX_CACHED_CHARS)


@lru_cache(maxsize=4096, typed=True)  # typed: 1 and True are different values here
def _pair(tag: int, key: str, value: Any) -> bytes:
    """One KeyValue, encoded once: run and finding spans repeat most of theirs (flags, small
    counts, kinds, run ids) from span to span."""
    return _field(tag, _key(key) + _field(0x12, any_value(value)))


def event(name: str, time_ns: int, values: Mapping[str, Any]) -> bytes:
    """A Span.Event (time 1 fixed64, name 2, attributes 3) as a Span.events field."""
    body = b"\x09" + _FIXED64.pack(time_ns & _U64) + _field(0x12, name.encode("utf-8", "replace"))
    return _field(SPAN_EVENT, body + attributes(values, EVENT_ATTRIBUTE))


def link(trace_id: bytes, span_id: bytes) -> bytes:
    """A Span.Link (trace_id 1, span_id 2) as a Span.links field."""
    return _field(SPAN_LINK, _field(0x0A, trace_id) + _field(0x12, span_id))


def forget_cached() -> None:
    """Empty the encoding caches (a receiver after a burst: their entries, made all through
    it, would keep the memory around them from going back; they refill in a few requests)."""
    _key.cache_clear()
    _pair.cache_clear()
