"""At its memory bound the receiver refuses whole requests with RetryInfo, then recovers."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2

from .agent import LOOP, encode, record_spans
from .harness import RUN, ReceiverThread, Sink, app_spans, attr, export_stub, make_config, wait_for


@pytest.mark.parametrize("bound", ["max_buffered_calls", "max_open_runs", None])
def test_open_runs_at_their_bound_cut_the_quietest_run_short_instead_of_refusing_everyone(
        sink: Sink, bound: str | None) -> None:
    """One sender's run that never completes must not freeze intake for the others: at the
    bound the quietest run is judged now, as incomplete (saying why), and the next request is
    taken. Negative control (bound None): below the bounds nothing is cut."""
    limits = {} if bound is None else {bound: 1}
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=30.0, **limits))
    metrics = receiver.running.metrics
    channel, stub = export_stub(receiver.port)
    try:
        first_trace, first = record_spans(LOOP[:1])
        tool = [s for s in first if s.name.startswith("execute_tool")]
        stub.Export(encode(tool), timeout=10)  # an untagged call: held until the run completes
        assert receiver.sync(lambda: receiver.running.assembler.buffered_calls) == 1

        _, other = record_spans(LOOP[:2])  # another agent's whole trace: taken, not refused
        response = stub.Export(encode(other), timeout=10)
        assert not response.HasField("partial_success")
        assert metrics.get("backpressure_total") == 0
        assert len(app_spans(sink)) == 1 + len(other)
        if bound is None:
            assert metrics.get("runs_shed_total") == 0
            assert first_trace in receiver.sync(lambda: set(receiver.running.assembler.runs))
            return
        assert metrics.get("runs_shed_total") == 1
        summary = wait_for(lambda: [r for r in sink.runs() if attr(r, "loopguard.run.id") == first_trace],
                           what="the cut run's summary")[0]
        assert attr(summary, "loopguard.run.outcome") == "incomplete_trace"  # never scored as passing
        cut = [f for f in sink.findings() if attr(f, "loopguard.finding.kind") == "incomplete_trace"
               and attr(f, "loopguard.run.id") == first_trace]
        assert len(cut) == 1 and "bound for open runs" in attr(cut[0], "loopguard.finding.reason")
        # a later span of the cut run is forwarded, not judged (late), and nothing is refused
        later = [s for s in first if not s.name.startswith("execute_tool")]
        stub.Export(encode(later), timeout=10)
        assert len(app_spans(sink)) == len(first) + len(other)
        assert metrics.get("backpressure_total") == 0
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
