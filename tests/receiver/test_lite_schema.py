"""The receiver's one parse (otlp/lite.py) refuses exactly what the full schema refuses.

The service no longer parses every request twice: the lite schema is trace.proto with
a map view of span attributes, so it must validate as much as ExportTraceServiceRequest
does, UTF-8 in every string field included, or invalid requests would be forwarded.
"""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from otel_loopguard.otlp.lite import LiteRequest

MARK = "ZQZQ"  # replaced by invalid UTF-8 of the same length, field by field
_BAD = b"\xff\xfe\xc0\x80"


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _request(where: str) -> bytes:
    """A request using every string field once; `where` names the one that holds MARK."""
    def text(name: str) -> str:
        return MARK if name == where else name

    span = Span(
        trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name=text("span.name"), trace_state=text("span.trace_state"),
        attributes=[_kv(text("span.attr.key"), text("span.attr.value"))],
        events=[Span.Event(name=text("event.name"), attributes=[_kv(text("event.attr.key"), "v")])],
        links=[Span.Link(trace_id=b"\x03" * 16, span_id=b"\x04" * 8, trace_state=text("link.trace_state"),
                         attributes=[_kv("k", text("link.attr.value"))])],
        status=Status(code=2, message=text("status.message")),
    )
    scope = InstrumentationScope(name=text("scope.name"), version=text("scope.version"),
                                 attributes=[_kv("k", text("scope.attr.value"))])
    resource = Resource(attributes=[_kv(text("resource.attr.key"), text("resource.attr.value"))])
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=resource, schema_url=text("resource.schema_url"),
        scope_spans=[ScopeSpans(scope=scope, schema_url=text("scope.schema_url"), spans=[span])])])
    return request.SerializeToString()


FIELDS = ["span.name", "span.trace_state", "span.attr.key", "span.attr.value", "event.name", "event.attr.key",
          "link.trace_state", "link.attr.value", "status.message", "scope.name", "scope.version",
          "scope.attr.value", "resource.attr.key", "resource.attr.value", "resource.schema_url", "scope.schema_url"]


def _refused(parse: object, data: bytes) -> bool:
    try:
        parse(data)  # type: ignore[operator]
    except (DecodeError, RuntimeError):
        return True
    return False


@pytest.mark.parametrize("where", FIELDS)
def test_invalid_utf8_in_any_string_field_is_refused_by_both(where: str) -> None:
    data = _request(where)
    assert MARK.encode() in data and not _refused(LiteRequest.FromString, data)  # the fixture is valid as built
    bad = data.replace(MARK.encode(), _BAD)
    assert _refused(ExportTraceServiceRequest.FromString, bad)
    assert _refused(LiteRequest.FromString, bad), where


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(FIELDS), st.integers(0, 2**32), st.integers(1, 4))
def test_damaged_requests_are_refused_by_one_parse_exactly_when_by_the_other(where: str, seed: int, flips: int) -> None:
    data = bytearray(_request(where))
    rnd = random.Random(seed)
    for _ in range(flips):
        if rnd.random() < 0.2:
            del data[rnd.randrange(len(data)):]  # truncated
            if not data:
                break
        else:
            data[rnd.randrange(len(data))] = rnd.randrange(256)
    data = bytes(data)
    assert _refused(LiteRequest.FromString, data) == _refused(ExportTraceServiceRequest.FromString, data)
