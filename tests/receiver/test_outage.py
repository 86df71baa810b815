"""Downstream outage: the receiver tells the sender to retry (RetryInfo), remembers
nothing it could not forward, and after recovery every span arrives exactly once."""

from __future__ import annotations

import threading
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

from .agent import LOOP, provider, run_agent
from .harness import (
    FINDING,
    RUN,
    ReceiverThread,
    Sink,
    TaggedRun,
    app_spans,
    attr,
    export_stub,
    findings_of,
    make_config,
    make_span,
    request_of,
    wait_for,
)

RETRY_AFTER = 0.2


def _trailers(err: grpc.RpcError) -> dict[str, Any]:
    return dict(err.trailing_metadata() or ())


def test_outage_then_recovery_every_span_once_then_findings(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, forward_timeout_seconds=0.3, retry_after_seconds=RETRY_AFTER))
    try:
        sink.down = True
        tp = provider(receiver.port)  # the real OTLPSpanExporter, one export per span
        done: dict[str, Any] = {}
        app = threading.Thread(target=lambda: done.setdefault("trace", run_agent(tp, LOOP)), daemon=True)
        app.start()
        metrics = receiver.running.metrics
        wait_for(lambda: metrics.get("backpressure_total") >= 1, what="the app to be told to retry")

        # what the app's exporter was told, seen with a raw stub
        channel, stub = export_stub(receiver.port)
        probe = make_span(b"\x11" * 16, b"\x22" * 8, "probe", start=1, end=2)
        try:
            stub.Export(request_of([probe]), timeout=10)
            raise AssertionError("expected UNAVAILABLE while the downstream is down")
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE
            assert "unavailable" in (err.details() or "")
            trailers = _trailers(err)
        info = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert info.retry_delay.seconds + info.retry_delay.nanos / 1e9 == RETRY_AFTER
        status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
        assert status.code == grpc.StatusCode.UNAVAILABLE.value[0]
        packed = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
        assert len(packed) == 1
        unpacked = error_details_pb2.RetryInfo()
        packed[0].Unpack(unpacked)
        assert unpacked == info
        assert sink.spans() == []  # nothing got through

        sink.down = False
        app.join(30)
        assert not app.is_alive(), "the app's exporter never got its spans accepted"
        tp.shutdown()
        summary = wait_for(lambda: sink.runs(), what="run summary")[0]
        stop = [f for f in sink.findings() if attr(f, "loopguard.finding.severity") == "stop"]
        assert [attr(f, "loopguard.finding.kind") for f in stop] == ["repeat"]
        assert attr(summary, "loopguard.score.tool_calls") == 6

        spans = app_spans(sink)
        assert len(spans) == 1 + 6 + 6
        assert len({s.span_id for s in spans}) == len(spans)  # exactly once
        assert {s.trace_id.hex() for s in spans} == {done["trace"]}
        assert metrics.get("duplicates_total") == 0  # the sender's retries were not duplicates
        assert findings_named_no_duplicate(sink)
        # the findings follow the spans they judge
        order = [(i, s.name) for i, r in enumerate(sink.requests) for rs in r.resource_spans
                 for ss in rs.scope_spans for s in ss.spans]
        last_app = max(i for i, name in order if not name.startswith("loopguard."))
        first_finding = min(i for i, name in order if name.startswith("loopguard."))
        assert first_finding > last_app
        channel.close()
    finally:
        sink.down = False
        receiver.stop()


def findings_named_no_duplicate(sink: Sink) -> bool:
    return not [f for f in sink.findings() if attr(f, "loopguard.finding.kind") == "telemetry_duplicate"]


def test_findings_wait_for_the_downstream_and_are_delivered_once_it_is_back(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=1.0))
    try:
        tp = provider(receiver.port)
        run_agent(tp, LOOP)
        tp.shutdown()  # all app spans accepted and forwarded
        sink.down = True  # ... then the downstream goes away before the run is judged
        wait_for(lambda: receiver.running.metrics.get("export_failures_total") >= 1, what="a failed finding export")
        assert sink.findings() == []
        sink.down = False
        wait_for(lambda: sink.runs(), what="run summary after recovery")
        assert [f for f in sink.findings() if attr(f, "loopguard.finding.severity") == "stop"]
    finally:
        sink.down = False
        receiver.stop()


def test_a_sender_whose_deadline_passes_mid_forward_does_not_get_its_spans_stored_twice() -> None:
    """The downstream takes the spans but answers after the sender gave up (DEADLINE_EXCEEDED).
    The receiver finishes the delivery anyway and remembers the spans, so the sender's retry
    is a duplicate: each span reaches the backend once, and the run is judged."""
    sink = _SlowFirstAnswer()
    receiver = ReceiverThread(make_config(sink.port, forward_timeout_seconds=5.0))
    try:
        run = TaggedRun()
        request = request_of([run.call(seq) for seq in range(1, 6)])
        channel, stub = export_stub(receiver.port)
        with channel:
            try:
                stub.Export(request, timeout=0.5)
                raise AssertionError("the first attempt should have hit its deadline")
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            delivered = wait_for(lambda: _retry(stub, request), timeout=10, what="the retry to be answered")
        assert delivered == "duplicate"
        stored = [s.span_id for s in app_spans(sink)]
        assert sorted(stored) == sorted(run.span_ids.values())  # each once
        assert receiver.running.metrics.get("duplicates_total") == 5
        wait_for(lambda: findings_of(sink, kind="repeat"), what="the run judged from the first delivery")
    finally:
        receiver.stop()
        sink.stop()


class _SlowFirstAnswer(Sink):
    """Stores the first request at once but answers it 1.5 s later."""

    def __init__(self) -> None:
        self.answered_late = threading.Event()
        super().__init__()

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        answer = super().Export(request, context)
        if not self.answered_late.is_set():
            self.answered_late.set()
            threading.Event().wait(1.5)
        return answer


def _retry(stub: Any, request: Any) -> str:
    try:
        response = stub.Export(request, timeout=5)
    except grpc.RpcError as err:  # still in flight: the sender is told to come back
        assert err.code() == grpc.StatusCode.UNAVAILABLE, err
        return ""
    assert not response.HasField("partial_success") or not response.partial_success.rejected_spans
    return "duplicate"
