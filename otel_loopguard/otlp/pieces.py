"""A large ExportTraceServiceRequest cut into smaller requests, at the wire level.

protobuf parses a request in one call that holds the interpreter for as long as it runs
(tens of milliseconds for a request of tens of megabytes): every other sender waits that
long. Cut into requests of at most `spans` spans, each parse is short, and the thread that
decodes them gives the others their turn in between.

A piece is a request of its own: one ResourceSpans (the resource and schema URL as they
were) holding one ScopeSpans (the scope and schema URL as they were) with a run of that
scope's spans, in order. Parsing the pieces therefore checks what parsing the whole would
check. Only the shape OTLP defines is cut: anything else at these three levels (a field
this walk does not know, a wire type it does not expect, a length past the end) gives
None, and the caller parses the request whole, so its errors stay protobuf's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

# (field number << 3 | wire type 2) of the fields cut here.
_RESOURCE_SPANS = 0x0A  # ExportTraceServiceRequest.resource_spans = 1
_RESOURCE, _SCOPE_SPANS, _SCHEMA_URL = 0x0A, 0x12, 0x1A  # ResourceSpans: resource 1, scope_spans 2, schema_url 3
_SCOPE, _SPANS = 0x0A, 0x12  # ScopeSpans: scope 1, spans 2 (schema_url 3 as above)


class _NotCut(Exception):
    """The bytes are not the plain shape: parse them whole."""


@dataclass(frozen=True)
class Piece:
    data: bytes  # a request of its own
    resource: int  # where its spans sit in the whole request: resource_spans index,
    scope: int  # scope_spans index in that resource,
    first: int  # the index of its first span in that scope,
    spans: int  # and how many it holds


def cut(data: bytes, spans: int) -> Optional[list[Piece]]:
    """The request in pieces of at most `spans` spans, or None when it is not the plain shape."""
    try:
        return [p for r, (_, _, start, end) in enumerate(_fields(data, 0, len(data), {_RESOURCE_SPANS}))
                for p in _cut_resource(data, r, start, end, spans)]
    except _NotCut:
        return None


def _cut_resource(data: bytes, r: int, start: int, end: int, spans: int) -> list[Piece]:
    head, scopes = b"", []
    for tag, opened, value, stop in _fields(data, start, end, {_RESOURCE, _SCOPE_SPANS, _SCHEMA_URL}):
        if tag == _SCOPE_SPANS:
            scopes.append((value, stop))
        else:
            head += data[opened:stop]
    if not scopes:  # still parsed: its resource is checked as in the whole request
        return [Piece(data=_field(_RESOURCE_SPANS, head), resource=r, scope=0, first=0, spans=0)]
    out = []
    for s, (value, stop) in enumerate(scopes):
        scope_head, runs = _cut_scope(data, value, stop, spans)
        for first, count, body in runs:
            scope = _field(_SCOPE_SPANS, scope_head + body)
            out.append(Piece(data=_field(_RESOURCE_SPANS, head + scope), resource=r, scope=s, first=first, spans=count))
    return out


def _cut_scope(data: bytes, start: int, end: int, spans: int) -> tuple[bytes, list[tuple[int, int, bytes]]]:
    """The scope's own fields, and its spans in runs of at most `spans` adjacent ones:
    (index of the first, how many, their bytes)."""
    head, runs, count = b"", [], 0
    begun = last = first = -1
    for tag, opened, _, stop in _fields(data, start, end, {_SCOPE, _SPANS, _SCHEMA_URL}):
        if tag != _SPANS:
            head += data[opened:stop]
            continue
        if begun >= 0 and (count - first == spans or opened != last):
            runs.append((first, count - first, data[begun:last]))
            begun = -1
        if begun < 0:
            begun, first = opened, count
        last = stop
        count += 1
    if begun >= 0:
        runs.append((first, count - first, data[begun:last]))
    return head, runs or [(0, 0, b"")]


def _fields(data: bytes, start: int, end: int, known: set[int]) -> Iterator[tuple[int, int, int, int]]:
    """(tag, field start, value start, value end) of each field between start and end: all
    length-delimited, with one-byte tags."""
    at = start
    while at < end:
        tag = data[at]
        if tag not in known:
            raise _NotCut
        length, value = _varint(data, at + 1, end)
        if value + length > end:
            raise _NotCut
        yield tag, at, value, value + length
        at = value + length


def _varint(data: bytes, at: int, end: int) -> tuple[int, int]:
    """The varint at `at`, and where it ends."""
    value, shift = 0, 0
    while at < end and shift < 35:  # a length beyond 2**35 is not a request's
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7
    raise _NotCut


def _field(tag: int, payload: bytes) -> bytes:
    n, length = len(payload), bytearray()
    while n >= 0x80:
        length.append((n & 0x7F) | 0x80)
        n >>= 7
    length.append(n)
    return bytes((tag,)) + bytes(length) + payload
