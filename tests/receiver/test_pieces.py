"""A large request decoded a piece at a time (otlp/pieces.py) gives what decoding it whole gives.

The same records at the same positions, the same rejections, the same refusals, on requests of
every shape OTLP allows (several resources and scopes, empty ones, fields in any order, spans
not adjacent), on generated and mutated requests, and on recorded agent spans. Pieces of one to
three spans make every boundary a case.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any, Callable

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from tiers import cases, examples
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_loopguard.otlp.pieces import cut
from otel_loopguard.receiver.ingest.decode import TooManySpans
from otel_loopguard.receiver.ingest.decoder import decode, decode_in_pieces

from reliability import fuzzing

ROOT = Path(__file__).resolve().parents[2]


def _captures_script() -> Any:
    spec = importlib.util.spec_from_file_location("captures_to_otlp", ROOT / "scripts" / "captures_to_otlp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CAPTURE_SCRIPT = _captures_script()


def outcome(run: Callable[[], Any]) -> Any:
    try:
        result = run()
    except (DecodeError, RuntimeError, TooManySpans) as exc:
        return type(exc)
    return result.spans, result.rejected


def same(data: bytes, piece_spans: int = 2, max_spans: Any = None) -> Any:
    whole = outcome(lambda: decode(data, "session.id", max_spans))
    pieces = outcome(lambda: decode_in_pieces(data, "session.id", max_spans, piece_spans))
    assert repr(pieces) == repr(whole)  # by repr: a NaN attribute value is not equal to itself
    return whole


def span(n: int, **extra: Any) -> Span:
    attrs = [KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="execute_tool")),
             KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value=f"tool{n % 3}")),
             KeyValue(key="gen_ai.tool.call.arguments", value=AnyValue(string_value=f'{{"n": {n % 2}}}')),
             KeyValue(key="session.id", value=AnyValue(string_value="conv-1"))]
    return Span(trace_id=bytes([1 + n % 2]) * 16, span_id=(n + 1).to_bytes(8, "big"), parent_span_id=b"\x09" * 8,
                name="execute_tool", start_time_unix_nano=10 * n, end_time_unix_nano=10 * n + 5, attributes=attrs,
                **extra)


def request(*resources: list[list[Span]]) -> bytes:
    return ExportTraceServiceRequest(resource_spans=[
        ResourceSpans(resource=Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value=f"r{r}"))]),
                      schema_url=f"https://r{r}", scope_spans=[
                          ScopeSpans(scope=InstrumentationScope(name=f"s{s}"), schema_url=f"https://s{s}", spans=spans)
                          for s, spans in enumerate(scopes)])
        for r, scopes in enumerate(resources)]).SerializeToString()


def test_every_span_keeps_its_place_in_the_whole_request() -> None:
    data = request([[span(n) for n in range(7)], [], [span(n) for n in range(7, 9)]], [[span(n) for n in range(9, 14)]])
    spans, rejected = same(data)
    assert [d.where for d in spans] == ([(0, 0, i) for i in range(7)] + [(0, 2, 0), (0, 2, 1)]
                                        + [(1, 0, i) for i in range(5)])
    assert not rejected
    pieces = cut(data, 3)
    assert pieces is not None and [(p.resource, p.scope, p.first, p.spans) for p in pieces] == [
        (0, 0, 0, 3), (0, 0, 3, 3), (0, 0, 6, 1), (0, 1, 0, 0), (0, 2, 0, 2), (1, 0, 0, 3), (1, 0, 3, 2)]
    for p in pieces:  # each piece is a request of its own, with the resource and scope it came from
        (rs,) = ExportTraceServiceRequest.FromString(p.data).resource_spans
        assert rs.schema_url == f"https://r{p.resource}" and rs.scope_spans[0].scope.name == f"s{p.scope}"


def test_rejected_spans_are_named_by_their_place_in_the_whole_request() -> None:
    bad = span(3)
    bad.span_id = b"\x00" * 8
    spans, rejected = same(request([[span(0), span(1), span(2), bad, span(4)]]))
    assert [where for where, _ in rejected] == [(0, 0, 3)]
    assert len(spans) == 4


def test_fields_in_any_order_and_spans_not_adjacent() -> None:
    """A scope's own fields between its spans: OTLP does not fix the order of fields."""
    spans = [span(n).SerializeToString() for n in range(4)]
    late = InstrumentationScope(name="late", attributes=[KeyValue(key="a", value=AnyValue(int_value=1))])
    scope = late.SerializeToString()

    def field(tag: int, payload: bytes) -> bytes:
        return bytes((tag, len(payload))) + payload if len(payload) < 128 else (
            bytes((tag,)) + bytes(((len(payload) & 0x7F) | 0x80, len(payload) >> 7)) + payload)

    scope_spans = field(0x12, spans[0]) + field(0x12, spans[1]) + field(0x0A, scope) + field(0x12, spans[2]) \
        + field(0x1A, b"https://x") + field(0x12, spans[3])
    data = field(0x0A, field(0x12, scope_spans) + field(0x0A, Resource().SerializeToString()))
    decoded, _ = same(data, piece_spans=8)
    assert [d.where for d in decoded] == [(0, 0, i) for i in range(4)]
    pieces = cut(data, 8)
    assert pieces is not None and [(p.first, p.spans) for p in pieces] == [(0, 2), (2, 1), (3, 1)]
    for p in pieces:  # the scope's fields once in each piece, its spans exactly those counted
        (ss,) = ExportTraceServiceRequest.FromString(p.data).resource_spans[0].scope_spans
        assert ss.scope == late and ss.schema_url == "https://x" and len(ss.spans) == p.spans


def test_what_is_not_the_plain_shape_is_decoded_whole() -> None:
    """Unknown fields at the levels cut here: not cut, so protobuf keeps them as it would."""
    plain = request([[span(0), span(1), span(2)]])
    unknown = plain + bytes((0x10, 0x01))  # field 2, a varint: unknown to the request
    assert cut(plain, 1) is not None and cut(unknown, 1) is None
    same(unknown, piece_spans=1)


def test_refusals_are_those_of_the_whole_parse() -> None:
    data = request([[span(n) for n in range(6)]])
    assert same(data[:-3]) is DecodeError  # truncated inside the last span
    bad_utf8 = bytearray(data)
    at = bytes(bad_utf8).index(b"tool1")
    bad_utf8[at] = 0xFF  # not UTF-8 in a span's attribute
    assert same(bytes(bad_utf8)) is DecodeError
    # A resource with no scope is still checked: not UTF-8 in its attribute refuses the request.
    empty_resource = ResourceSpans(resource=Resource(attributes=[KeyValue(key="k", value=AnyValue(string_value="vv"))]))
    with_bad = request([[span(0), span(1), span(2)]]) + ExportTraceServiceRequest(
        resource_spans=[empty_resource]).SerializeToString().replace(b"vv", b"\xff\xff")
    assert same(with_bad) is DecodeError
    assert same(data, max_spans=5) is TooManySpans
    assert same(data, max_spans=6) is not TooManySpans


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(fuzzing.requests)
def test_generated_requests(data: bytes) -> None:
    same(data, piece_spans=1)


def test_seeded_and_mutated_requests() -> None:
    rnd = random.Random(20261202)
    for _ in range(cases(1500)):
        data = fuzzing.random_request(rnd)
        same(data, piece_spans=rnd.randint(1, 3))
        same(fuzzing.mutate(data, rnd), piece_spans=rnd.randint(1, 3))
    for data in fuzzing.corpus():
        for _ in range(cases(100)):
            same(fuzzing.mutate(data, rnd), piece_spans=rnd.randint(1, 3))


@pytest.mark.parametrize("capture", CAPTURE_SCRIPT.capture_files(), ids=lambda p: p.stem)
def test_recorded_agent_spans(capture: Path) -> None:
    """The framework captures (research/conventions/captures), a span per piece and three."""
    spans = [CAPTURE_SCRIPT.to_span(s) for s in json.loads(capture.read_text(encoding="utf-8"))["spans"]]
    data = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    decoded, _ = same(data.SerializeToString(), piece_spans=1)
    same(data.SerializeToString(), piece_spans=3)
    assert len(decoded) == len(spans)


@pytest.mark.parametrize("fixture", sorted((ROOT / "tests" / "fixtures" / "otlp").glob("*.pb")), ids=lambda p: p.name)
def test_recorded_requests(fixture: Path) -> None:
    assert same(fixture.read_bytes(), piece_spans=2) is not DecodeError


def test_the_receiver_parses_a_large_request_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_loopguard.receiver.ingest import decoder as decode_module
    from otel_loopguard.receiver.front import service

    data = request([[span(n) for n in range(5000)]])
    parses: list[int] = []
    real = decode_module.decode

    def spy(piece: bytes, *args: Any) -> Any:
        parses.append(len(piece))
        return real(piece, *args)

    monkeypatch.setattr(decode_module, "decode", spy)
    monkeypatch.setattr(service, "decode", spy)
    monkeypatch.setattr(service, "LARGE_REQUEST_BYTES", len(data))
    assert repr(service.parse_request(data, "session.id").spans) == repr(real(data, "session.id").spans)
    assert len(parses) == 3 and max(parses) < len(data) / 2  # 2,048 spans at most a parse
    parses.clear()
    monkeypatch.setattr(service, "LARGE_REQUEST_BYTES", len(data) + 1)
    service.parse_request(data, "session.id")
    assert parses == [len(data)]  # a small request: one parse
