"""A span re-delivered while its first copy is still being handled never holds back others.

Two copies of one request at the same moment (an SDK's retry, a Collector exporting to a
replica in parallel) are answered as the first copy settles: accepted as duplicates, or,
when the first copy failed, delivered from the second; spans of other traces in the same
request go through at once. The spans are recorded with the real SDK and encoded as its
OTLP exporter encodes them; the receiver and the downstream are real gRPC servers.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from otel_loopguard.receiver.front import service

from .agent import LOOP, encode, record_spans
from .harness import ReceiverThread, Sink, app_spans, export_stub, make_config, wait_for

TRACES = 8
CALLS = 10  # a root, then a chat and a tool span per call: 21 spans a trace
SPANS = TRACES * (1 + 2 * CALLS)  # 168, the request of issue 27
ROUNDS = 15
MODES = {
    "findings-only": dict(findings_only=True),
    "inline": dict(forward_queue_bytes=0),  # forwarded before the answer
    "inline, queued": dict(forward_queue_bytes=1 << 24),  # answered once queued
}


@pytest.fixture(scope="module")
def template() -> trace_service_pb2.ExportTraceServiceRequest:
    """One request of 168 spans: eight traces of a looping agent, as the exporter sends them."""
    spans = [s for _ in range(TRACES) for s in record_spans(LOOP[:1] * CALLS)[1]]
    request = encode(spans)
    assert _count(request) == SPANS
    return request


def _count(request: Any) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def _renamed(template: Any, salt: str, traces: slice = slice(None)) -> Any:
    """The template's spans under new trace ids (so every round is new to the receiver);
    `traces` keeps only some of its traces, in the template's order."""
    out = trace_service_pb2.ExportTraceServiceRequest()
    out.CopyFrom(template)
    order: list[bytes] = []
    for rs in out.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.trace_id not in order:
                    order.append(span.trace_id)
    keep = set(order[traces])
    for rs in out.resource_spans:
        for ss in rs.scope_spans:
            kept = [s for s in ss.spans if s.trace_id in keep]
            del ss.spans[:]
            ss.spans.extend(kept)
            for span in ss.spans:
                span.trace_id = hashlib.sha256(salt.encode() + span.trace_id).digest()[:16]
    return out


def _ids(request: Any) -> list[tuple[bytes, bytes]]:
    return [(s.trace_id, s.span_id) for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _forwarded(sink: Sink) -> Counter[tuple[bytes, bytes]]:
    return Counter((s.trace_id, s.span_id) for s in app_spans(sink))


def _twice_at_once(stubs: list[Any], request: Any) -> list[Any]:
    """Both copies on the wire before either is answered; each answer or the error it raised."""
    calls = [stub.Export.future(request, timeout=30) for stub in stubs]
    out = []
    for call in calls:
        try:
            out.append(call.result())
        except grpc.RpcError as err:
            out.append(err)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_one_168_span_request_sent_twice_at_once_is_never_refused(
        sink: Sink, template: Any, mode: str) -> None:
    receiver = ReceiverThread(make_config(sink.port, forward_timeout_seconds=10.0, **MODES[mode]))
    pairs = [export_stub(receiver.port) for _ in range(2)]
    try:
        sent: list[tuple[bytes, bytes]] = []
        for n in range(ROUNDS):
            request = _renamed(template, f"{mode}/{n}")
            answers = _twice_at_once([stub for _, stub in pairs], request)
            refused = [a for a in answers if isinstance(a, grpc.RpcError)]
            assert not refused, f"round {n}: a copy was refused: {refused[0].code()} {refused[0].details()}"
            assert all(not a.HasField("partial_success") for a in answers), f"round {n}: {answers}"
            sent += _ids(request)
        metrics = receiver.running.metrics
        assert metrics.get("backpressure_total") == 0
        assert metrics.get("duplicates_total") == ROUNDS * SPANS  # each second copy, every span of it
        assert metrics.get("spans_received_total") == 2 * ROUNDS * SPANS
        if mode != "findings-only":  # each span reaches the backend exactly once
            wait_for(lambda: sum(_forwarded(sink).values()) >= len(sent), what="every span forwarded")
            assert _forwarded(sink) == Counter(sent)
    finally:
        for channel, _ in pairs:
            channel.close()
        receiver.stop()


class GatedSink(Sink):
    """A downstream that holds the first request it gets until released, then takes it or
    refuses it for good (PERMISSION_DENIED: the receiver does not retry that one)."""

    def __init__(self, *, refuse_first: bool = False) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.refuse_first = refuse_first
        self._first = True
        super().__init__()

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.arrived.set()
            if not self.release.wait(20):
                context.abort(grpc.StatusCode.INTERNAL, "the test never released the first request")
            if self.refuse_first:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "the first copy is refused")
        return super().Export(request, context)


def _gated(refuse_first: bool = False) -> tuple[GatedSink, ReceiverThread]:
    sink = GatedSink(refuse_first=refuse_first)
    return sink, ReceiverThread(make_config(sink.port, forward_timeout_seconds=10.0))


def _both_in_hand(receiver: ReceiverThread) -> bool:
    return receiver.sync(lambda: receiver.running.receiver.handling) == 2


def test_overlapping_requests_the_new_traces_go_through_while_the_shared_ones_wait(template: Any) -> None:
    sink, receiver = _gated()
    channel, stub = export_stub(receiver.port)
    try:
        first = _renamed(template, "overlap", slice(0, 4))  # traces 1-4
        second = _renamed(template, "overlap", slice(2, 8))  # traces 3-8: 3 and 4 are in flight
        a = stub.Export.future(first, timeout=30)
        assert sink.arrived.wait(10), "the first request never reached the downstream"
        b = stub.Export.future(second, timeout=30)
        shared = set(_ids(first)) & set(_ids(second))
        only_second = set(_ids(second)) - shared
        # While the first request is held downstream, the second one's own traces are delivered.
        wait_for(lambda: set(_forwarded(sink)) >= only_second, what="the second request's own traces, at once")
        assert not set(_forwarded(sink)) & shared and not a.done() and not b.done()
        sink.release.set()
        assert not a.result().HasField("partial_success")
        assert not b.result().HasField("partial_success")
        assert _forwarded(sink) == Counter(set(_ids(first)) | set(_ids(second)))  # each span once
        assert receiver.running.metrics.get("duplicates_total") == len(shared)
        assert receiver.running.metrics.get("spans_waited_total") == len(shared)
    finally:
        channel.close()
        receiver.stop()
        sink.stop()


def test_when_the_first_copy_fails_downstream_the_waiting_copy_is_delivered(template: Any) -> None:
    sink, receiver = _gated(refuse_first=True)
    channels = [export_stub(receiver.port) for _ in range(2)]
    try:
        request = _renamed(template, "first-fails")
        a = channels[0][1].Export.future(request, timeout=30)
        assert sink.arrived.wait(10), "the first copy never reached the downstream"
        b = channels[1][1].Export.future(request, timeout=30)
        wait_for(lambda: _both_in_hand(receiver), what="the second copy to wait for the first")
        sink.release.set()
        with pytest.raises(grpc.RpcError) as refused:
            a.result()
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # its sender keeps the spans
        assert not b.result().HasField("partial_success")
        assert _forwarded(sink) == Counter(_ids(request))  # delivered by the second copy, once
        assert receiver.running.metrics.get("duplicates_total") == 0
    finally:
        for channel, _ in channels:
            channel.close()
        receiver.stop()
        sink.stop()


def test_a_copy_still_in_flight_past_the_bound_is_retried_not_dropped(
        template: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound the sender hears UNAVAILABLE, never a partial success (OTLP senders do not
    retry one): its retry finds the first copy settled, and each span is delivered once."""
    monkeypatch.setattr(service.TraceReceiver, "_settle_seconds", lambda self: 0.2)
    sink, receiver = _gated()
    channels = [export_stub(receiver.port) for _ in range(2)]
    try:
        request = _renamed(template, "past-the-bound", slice(0, 2))
        a = channels[0][1].Export.future(request, timeout=30)
        assert sink.arrived.wait(10), "the first copy never reached the downstream"
        with pytest.raises(grpc.RpcError) as refused:
            channels[1][1].Export(request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "still being delivered by another request" in (refused.value.details() or "")
        sink.release.set()
        assert not a.result().HasField("partial_success")
        assert not channels[1][1].Export(request, timeout=30).HasField("partial_success")  # the retry
        assert _forwarded(sink) == Counter(_ids(request))
        assert receiver.running.metrics.get("duplicates_total") == len(_ids(request))
    finally:
        for channel, _ in channels:
            channel.close()
        receiver.stop()
        sink.stop()


@pytest.mark.parametrize("mode", ["findings-only", "inline, queued"])
def test_a_copy_arriving_while_the_first_is_judged_waits_and_is_a_duplicate(
        sink: Sink, template: Any, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a forward to hold the first copy, it is held while it is judged (the step that
    remembers its spans): the second copy, arriving then, waits and is a duplicate."""
    original = service.TraceReceiver._accept  # noqa: SLF001
    gate: dict[str, asyncio.Event] = {}

    async def first_held(self: Any, *args: Any) -> Any:
        if "judging" not in gate:
            gate["judging"] = asyncio.Event()
            await asyncio.wait_for(gate["judging"].wait(), 20)
        return await original(self, *args)

    monkeypatch.setattr(service.TraceReceiver, "_accept", first_held)
    receiver = ReceiverThread(make_config(sink.port, forward_timeout_seconds=10.0, **MODES[mode]))
    channels = [export_stub(receiver.port) for _ in range(2)]
    try:
        request = _renamed(template, f"judged/{mode}")
        a = channels[0][1].Export.future(request, timeout=30)
        wait_for(lambda: receiver.sync(lambda: "judging" in gate), what="the first copy being judged")
        b = channels[1][1].Export.future(request, timeout=30)
        wait_for(lambda: _both_in_hand(receiver), what="the second copy to wait for the first")
        receiver.loop.call_soon_threadsafe(gate["judging"].set)
        assert not a.result().HasField("partial_success") and not b.result().HasField("partial_success")
        assert receiver.running.metrics.get("spans_waited_total") == SPANS
        assert receiver.running.metrics.get("duplicates_total") == SPANS
        if mode != "findings-only":
            wait_for(lambda: sum(_forwarded(sink).values()) >= SPANS, what="every span forwarded")
            assert _forwarded(sink) == Counter(_ids(request))
    finally:
        for channel, _ in channels:
            channel.close()
        receiver.stop()


def test_negative_control_refusing_copies_in_flight_fails_the_overlap_check(
        template: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The behaviour before issue 27 (a request with a span in flight elsewhere refused whole)
    is what the tests above catch: the second copy is refused."""

    async def refuse_at_once(self: Any, data: Any, decoded: Any, waiting: list[Any]) -> tuple[list[Any], list[Any]]:
        return [], waiting

    monkeypatch.setattr(service.TraceReceiver, "_after_others", refuse_at_once)
    sink, receiver = _gated()
    channel, stub = export_stub(receiver.port)
    try:
        request = _renamed(template, "control", slice(0, 1))
        a = stub.Export.future(request, timeout=30)
        assert sink.arrived.wait(10)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        sink.release.set()
        a.result()
    finally:
        channel.close()
        receiver.stop()
        sink.stop()
