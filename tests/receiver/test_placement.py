"""Where spans sit in their trace: clock skew is reported, not trusted (issue: "child before
parent, time going backwards"), whatever the delivery order; findings about one span go under
the run's root."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from .harness import RUN, ReceiverThread, Sink, TaggedRun, attr, export_stub, make_config, make_span, request_of, wait_for

MS = 1_000_000


@pytest.fixture
def receiver(sink: Sink) -> Iterator[ReceiverThread]:
    r = ReceiverThread(make_config(sink.port))
    yield r
    r.stop()


def _deliver(receiver: ReceiverThread, *requests: list[Any]) -> None:
    channel, stub = export_stub(receiver.port)
    with channel:
        for spans in requests:
            stub.Export(request_of(spans), timeout=10)


def _summary(sink: Sink) -> Any:
    return wait_for(lambda: sink.runs(), what="run summary")[0]


def _nested(run: TaggedRun, offset_ns: int, seq: int = 1) -> tuple[Any, Any, Any]:
    """root -> step -> tool call `seq`, the call starting `offset_ns` after its parent step."""
    step_id = b"\x05" * 8
    step = make_span(run.trace_id, step_id, "agent step", parent=run.root_id, start=run.t0 + 1000 * MS,
                     end=run.t0 + 5000 * MS)
    call = run.call(seq)
    call.parent_span_id = step_id
    call.start_time_unix_nano = step.start_time_unix_nano + offset_ns
    call.end_time_unix_nano = call.start_time_unix_nano + 100 * MS
    return step, call, run.root()


@pytest.mark.parametrize("order", ["child first", "parent first, same request", "parent in an earlier request"])
def test_a_call_starting_before_its_parent_is_reported_in_every_delivery_order(sink: Sink, receiver: ReceiverThread,
                                                                                order: str) -> None:
    run = TaggedRun(seed=31)
    earlier = run.call(1, args="0" * 32)  # the run is open: its trace's spans are remembered
    earlier.start_time_unix_nano, earlier.end_time_unix_nano = run.t0 + 100 * MS, run.t0 + 200 * MS
    step, call, root = _nested(run, offset_ns=-50 * MS, seq=2)
    if order == "child first":
        _deliver(receiver, [earlier, call, step, root])
    elif order == "parent first, same request":
        _deliver(receiver, [earlier, step, call, root])
    else:
        _deliver(receiver, [earlier], [step], [call], [root])
    assert attr(_summary(sink), "loopguard.run.clock_skew") is True
    assert receiver.running.metrics.get("clock_skew_total") == 1


@pytest.mark.parametrize("order", ["child first", "parent first"])
def test_a_call_inside_its_parent_is_no_skew(sink: Sink, receiver: ReceiverThread, order: str) -> None:
    run = TaggedRun(seed=32)
    step, call, root = _nested(run, offset_ns=+10 * MS)
    _deliver(receiver, [call, step, root] if order == "child first" else [step, call, root])
    assert attr(_summary(sink), "loopguard.run.clock_skew") is False
    assert receiver.running.metrics.get("clock_skew_total") == 0


def test_a_later_sequence_number_that_started_earlier_is_time_going_backwards(sink: Sink,
                                                                             receiver: ReceiverThread) -> None:
    run = TaggedRun(seed=33)
    first, second = run.call(1, args="1" * 32), run.call(2, args="2" * 32)
    second.start_time_unix_nano = first.start_time_unix_nano - 500 * MS
    second.end_time_unix_nano = second.start_time_unix_nano + 10 * MS
    _deliver(receiver, [first, second, run.root()])
    assert attr(_summary(sink), "loopguard.run.clock_skew") is True
    assert receiver.running.metrics.get("clock_skew_total") == 1


def test_siblings_dispatched_in_one_burst_within_a_millisecond_are_no_skew(sink: Sink, receiver: ReceiverThread) -> None:
    run = TaggedRun(seed=34)
    first, second = run.call(1, args="1" * 32), run.call(2, args="2" * 32)
    second.start_time_unix_nano = first.start_time_unix_nano - MS // 2  # parallel siblings may tie
    _deliver(receiver, [second, first, run.root()])
    assert attr(_summary(sink), "loopguard.run.clock_skew") is False


def test_a_duplicate_of_a_nested_call_is_reported_under_the_runs_root_with_its_tool(sink: Sink) -> None:
    """CONTRACT section 2: finding spans go under the run's root span when it is known."""
    from .harness import findings_of

    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=30.0))
    try:
        run = TaggedRun(seed=35)
        step, call, root = _nested(run, offset_ns=+10 * MS)
        _deliver(receiver, [step, call, root], [call])
        dup = wait_for(lambda: findings_of(sink, kind="telemetry_duplicate"), what="telemetry_duplicate")[0]
        assert dup.parent_span_id == run.root_id != call.parent_span_id
        assert attr(dup, "loopguard.tool.name") == run.tool
    finally:
        receiver.stop()


def test_span_ids_reused_in_another_trace_are_not_taken_for_the_parent(sink: Sink, receiver: ReceiverThread) -> None:
    """Span ids need only be unique within a trace: a parent with the same id in another trace,
    with other times, must not make a call look skewed."""
    run, other = TaggedRun(seed=36), TaggedRun(seed=37)
    step, call, root = _nested(run, offset_ns=+10 * MS)
    impostor = make_span(other.trace_id, step.span_id, "other step", start=run.t0 + 900_000 * MS,
                         end=run.t0 + 900_001 * MS)
    _deliver(receiver, [impostor, call, step, root])
    assert attr(_summary(sink), "loopguard.run.clock_skew") is False
    assert receiver.running.metrics.get("clock_skew_total") == 0


def test_siblings_waiting_for_their_parent_are_all_checked(sink: Sink, receiver: ReceiverThread) -> None:
    """Spans end children first, so siblings usually arrive before their parent: each of them
    is checked when it comes, not only the last one."""
    run = TaggedRun(seed=38)
    step, skewed, root = _nested(run, offset_ns=-50 * MS, seq=1)
    fine = run.call(2, args="2" * 32)
    fine.parent_span_id = step.span_id
    fine.start_time_unix_nano, fine.end_time_unix_nano = step.start_time_unix_nano + 200 * MS, step.start_time_unix_nano + 300 * MS
    _deliver(receiver, [skewed], [fine], [step, root])
    assert receiver.running.metrics.get("clock_skew_total") == 1
    assert attr(_summary(sink), "loopguard.run.clock_skew") is True
