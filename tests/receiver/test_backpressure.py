"""At its memory bound the receiver refuses whole requests with RetryInfo, then recovers."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2

from .agent import LOOP, encode, record_spans
from .harness import RUN, ReceiverThread, Sink, app_spans, attr, export_stub, make_config, wait_for


def test_buffered_untagged_calls_at_the_bound_refuse_the_next_request_until_the_run_completes(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, max_buffered_calls=1, idle_timeout_seconds=1.0,
                                          retry_after_seconds=0.5))
    metrics = receiver.running.metrics
    channel, stub = export_stub(receiver.port)
    try:
        first_trace, first = record_spans(LOOP[:1])
        tool = [s for s in first if s.name.startswith("execute_tool")]
        stub.Export(encode(tool), timeout=10)  # an untagged call: held until the run completes
        assert receiver.sync(lambda: receiver.running.assembler.buffered_calls) == 1
        forwarded_before = len(sink.spans())
        assert forwarded_before == 1

        _, other = record_spans(LOOP[:2])  # another agent's whole trace
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(encode(other), timeout=10)
        err = caught.value
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        assert "memory bound" in err.details()
        info = error_details_pb2.RetryInfo.FromString(dict(err.trailing_metadata())["google.rpc.retryinfo-bin"])
        assert (info.retry_delay.seconds, info.retry_delay.nanos) == (0, 500_000_000)
        assert "grpc-status-details-bin" in dict(err.trailing_metadata())
        assert len(sink.spans()) == forwarded_before  # nothing of it was forwarded
        assert metrics.get("backpressure_total") == 1
        assert metrics.get("duplicates_total") == 0

        # the first run completes (idle timeout), its calls are released...
        summary = wait_for(lambda: sink.runs(), what="first run summary")[0]
        assert attr(summary, "loopguard.run.id") == first_trace
        assert receiver.sync(lambda: receiver.running.assembler.buffered_calls) == 0
        # ... and the sender's retry is accepted, as new spans (not duplicates)
        response = stub.Export(encode(other), timeout=10)
        assert not response.HasField("partial_success")
        assert len(app_spans(sink)) == 1 + len(other)
        assert metrics.get("duplicates_total") == 0
    finally:
        channel.close()
        receiver.stop()


def test_tagged_calls_in_order_are_not_held(sink: Sink) -> None:
    """Calls numbered by the processor are judged as they arrive, so they never fill the buffer."""
    from .harness import TaggedRun, request_of

    receiver = ReceiverThread(make_config(sink.port, max_buffered_calls=1))
    channel, stub = export_stub(receiver.port)
    try:
        run = TaggedRun(seed=29)
        for seq in range(1, 7):
            stub.Export(request_of([run.call(seq)]), timeout=10)
        assert receiver.running.metrics.get("backpressure_total") == 0
        assert len(app_spans(sink)) == 6
    finally:
        channel.close()
        receiver.stop()
