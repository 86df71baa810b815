"""Malformed input is refused precisely, and the receiver keeps serving."""

from __future__ import annotations

import random
from typing import Iterator

import grpc
import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .harness import (
    ReceiverThread,
    Sink,
    app_spans,
    export_stub,
    make_config,
    make_span,
    request_of,
    wait_for,
)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
MiB = 1024 * 1024


@pytest.fixture
def receiver(sink: Sink) -> Iterator[ReceiverThread]:
    r = ReceiverThread(make_config(sink.port))
    yield r
    r.stop()


def _random_garbage(seed: int = 3) -> bytes:
    rnd = random.Random(seed)
    for _ in range(1000):
        data = rnd.randbytes(256)
        try:
            ExportTraceServiceRequest.FromString(data)
        except DecodeError:
            return data
    raise AssertionError("no undecodable random bytes found")


def _normal_request_is_served(port: int, sink: Sink, marker: bytes) -> None:
    channel, stub = export_stub(port)
    span = make_span(b"\x05" * 16, marker, "after", start=10, end=20)
    response = stub.Export(request_of([span]), timeout=10)
    channel.close()
    assert not response.HasField("partial_success")
    wait_for(lambda: [s for s in sink.spans() if s.span_id == marker], what="the normal request forwarded")


def test_random_bytes_are_invalid_argument_with_a_message(sink: Sink, receiver: ReceiverThread) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{receiver.port}")
    export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as caught:
        export(_random_garbage(), timeout=10)
    channel.close()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ExportTraceServiceRequest" in caught.value.details()
    assert receiver.running.metrics.get("invalid_requests_total") == 1
    assert sink.spans() == []
    _normal_request_is_served(receiver.port, sink, b"\x06" * 8)


def test_a_span_with_a_short_trace_id_is_rejected_alone(sink: Sink, receiver: ReceiverThread) -> None:
    bad = make_span(b"\x01\x02\x03", b"\x07" * 8, "short-trace-id", start=1, end=2)
    good = make_span(b"\x08" * 16, b"\x09" * 8, "valid", start=1, end=2)
    channel, stub = export_stub(receiver.port)
    response = stub.Export(request_of([bad, good]), timeout=10)
    channel.close()
    assert response.partial_success.rejected_spans == 1
    message = response.partial_success.error_message
    assert "trace_id" in message and "short-trace-id" in message and "3" in message
    forwarded = wait_for(lambda: app_spans(sink), what="the valid span forwarded")
    assert [s.span_id for s in forwarded] == [b"\x09" * 8]
    assert receiver.running.metrics.get("spans_rejected_total") == 1
    _normal_request_is_served(receiver.port, sink, b"\x0a" * 8)
    assert b"\x07" * 8 not in [s.span_id for s in sink.spans()]


@pytest.mark.parametrize(
    "bad, what",
    [
        (dict(trace_id=b"\x00" * 16, span_id=b"\x01" * 8), "trace_id"),
        (dict(trace_id=b"\x02" * 16, span_id=b"\x00" * 8), "span_id"),
        (dict(trace_id=b"\x02" * 16, span_id=b"\x03" * 7), "span_id"),
        (dict(trace_id=b"\x02" * 16, span_id=b"\x04" * 8, parent=b"\x05" * 5), "parent_span_id"),
    ],
    ids=["zero-trace-id", "zero-span-id", "short-span-id", "short-parent"],
)
def test_other_invalid_ids_are_rejected_with_a_reason(sink: Sink, receiver: ReceiverThread, bad: dict, what: str) -> None:
    span = make_span(bad["trace_id"], bad["span_id"], "bad", parent=bad.get("parent", b""), start=1, end=2)
    channel, stub = export_stub(receiver.port)
    response = stub.Export(request_of([span]), timeout=10)
    channel.close()
    assert response.partial_success.rejected_spans == 1
    assert what in response.partial_success.error_message
    _normal_request_is_served(receiver.port, sink, b"\x0c" * 8)
    assert [s.name for s in app_spans(sink)] == ["after"]


def test_a_request_over_4_mib_is_accepted_and_forwarded() -> None:
    big_sink = Sink(max_receive_bytes=32 * MiB)  # a downstream configured for big batches
    receiver = ReceiverThread(make_config(big_sink.port, max_receive_bytes=16 * MiB))
    try:
        spans = [
            make_span(b"\x0d" * 16, i.to_bytes(8, "big"), f"big-{i}", start=1, end=2,
                      attributes={"payload": "x" * (128 * 1024)})
            for i in range(1, 41)
        ]
        request = request_of(spans)
        assert 4 * MiB < request.ByteSize() < 16 * MiB
        channel, stub = export_stub(receiver.port)
        response = stub.Export(request, timeout=30)
        channel.close()
        assert not response.HasField("partial_success")
        assert len(app_spans(big_sink)) == 40
    finally:
        receiver.stop()
        big_sink.stop()


def test_a_request_over_max_receive_bytes_is_refused_and_serving_continues(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, max_receive_bytes=1 * MiB))
    try:
        span = make_span(b"\x0e" * 16, b"\x0f" * 8, "too-big", start=1, end=2, attributes={"payload": "x" * (2 * MiB)})
        channel, stub = export_stub(receiver.port)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(request_of([span]), timeout=10)
        channel.close()
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert sink.spans() == []
        _normal_request_is_served(receiver.port, sink, b"\x10" * 8)
    finally:
        receiver.stop()


def test_a_request_the_downstream_can_never_take_is_not_retried_forever(sink: Sink) -> None:
    # the sink keeps gRPC's default 4 MiB limit, as a default Collector does; the receiver takes 64 MiB
    receiver = ReceiverThread(make_config(sink.port, forward_timeout_seconds=5.0))
    try:
        span = make_span(b"\x12" * 16, b"\x13" * 8, "too-big-for-downstream", start=1, end=2,
                         attributes={"payload": "x" * (5 * MiB)})
        channel, stub = export_stub(receiver.port)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(request_of([span]), timeout=10)
        channel.close()
        assert "google.rpc.retryinfo-bin" not in dict(caught.value.trailing_metadata() or ())
        assert caught.value.code() != grpc.StatusCode.UNAVAILABLE
    finally:
        receiver.stop()


def _with_bad_utf8_name(spans: list) -> bytes:
    """A request whose span name is not UTF-8: not a valid OTLP message (proto3 strings are UTF-8)."""
    data = request_of(spans).SerializeToString()
    assert data.count(b"QQQQ") == 1
    return data.replace(b"QQQQ", b"\xff\xfe\xfd\xfc")


@pytest.mark.parametrize(
    "with_invalid_id_span",
    [
        pytest.param(False, id="alone"),
        pytest.param(True, id="next-to-a-rejected-span"),
    ],
)
def test_a_non_utf8_string_field_is_invalid_argument(sink: Sink, receiver: ReceiverThread, with_invalid_id_span: bool) -> None:
    spans = [make_span(b"\x14" * 16, b"\x15" * 8, "QQQQ", start=1, end=2)]
    if with_invalid_id_span:
        spans.append(make_span(b"\x01\x02\x03", b"\x16" * 8, "short-trace-id", start=1, end=2))
    channel = grpc.insecure_channel(f"127.0.0.1:{receiver.port}")
    export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as caught:
        export(_with_bad_utf8_name(spans), timeout=10)
    channel.close()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details()
    _normal_request_is_served(receiver.port, sink, b"\x17" * 8)


def _nested_attribute(levels: int) -> bytes:
    """A request whose span has an attribute of `levels` maps in maps, written on the wire by
    hand: the Python runtime cannot even build one deeper than it decodes."""
    def field(number: int, payload: bytes) -> bytes:  # a length-delimited field
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    value = field(1, b"leaf")  # AnyValue.string_value
    for _ in range(levels):  # AnyValue.kvlist_value -> KeyValueList.values -> KeyValue{key, value}
        value = field(6, field(1, field(1, b"k") + field(2, value)))
    span = make_span(b"\x06" * 16, b"\x07" * 8, "deep", start=10, end=20).SerializeToString()
    span += field(9, field(1, b"deep") + field(2, value))  # Span.attributes: repeated, so appended
    return field(1, field(2, field(2, span)))  # request -> resource_spans -> scope_spans -> spans


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def test_a_value_nested_deeper_than_protobuf_decodes_is_refused_saying_so(sink: Sink, receiver: ReceiverThread) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{receiver.port}")
    export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
    with channel:
        export(_nested_attribute(20), timeout=10)  # deep, but within the limit: forwarded
        with pytest.raises(grpc.RpcError) as caught:
            export(_nested_attribute(40), timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "deeper than this receiver can decode" in caught.value.details()
    wait_for(lambda: [s.name for s in app_spans(sink)] == ["deep"], what="the request within the limit forwarded")
    _normal_request_is_served(receiver.port, sink, b"\x08" * 8)
