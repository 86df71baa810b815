"""Calls numbered by the in-process processor are judged as they arrive: findings stream.

Hand-made tool spans carry the processor's tags (CONTRACT section 1); the run's
root span is deliberately withheld so the run stays open.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from .harness import (
    RUN,
    ReceiverThread,
    Sink,
    TaggedRun,
    attr,
    export_stub,
    findings_of,
    read_findings,
    make_config,
    request_of,
    wait_for,
)

OPEN = dict(idle_timeout_seconds=30.0)  # nothing but the root span (or a test's stop) completes the run


@pytest.fixture
def receiver(sink: Sink) -> Iterator[ReceiverThread]:
    r = ReceiverThread(make_config(sink.port, **OPEN))
    yield r
    r.stop()


def _send(port: int, run: TaggedRun, seqs: list[int], *, one_per_request: bool = True) -> None:
    channel, stub = export_stub(port)
    try:
        batches = [[run.call(s)] for s in seqs] if one_per_request else [[run.call(s) for s in seqs]]
        for spans in batches:
            response = stub.Export(request_of(spans), timeout=10)
            assert not response.HasField("partial_success")
    finally:
        channel.close()


def _stop_repeat(sink: Sink) -> list[Any]:
    return [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "stop"]


@pytest.mark.parametrize("convention", ["gen_ai", "loopguard"])
def test_stop_finding_streams_while_the_run_is_open(sink: Sink, receiver: ReceiverThread, convention: str) -> None:
    run = TaggedRun(convention=convention)
    _send(receiver.port, run, [1, 2, 3, 4, 5, 6])
    stop = wait_for(lambda: _stop_repeat(sink), what="stop repeat finding")[0]
    assert receiver.sync(lambda: run.run_id in receiver.running.assembler.runs), "the run must still be open"
    assert sink.runs() == []  # no summary yet: the root never came
    assert stop.trace_id == run.trace_id
    assert stop.parent_span_id == run.root_id  # the run's root, known from the calls' parent
    assert (attr(stop, "loopguard.finding.first_seq"), attr(stop, "loopguard.finding.last_seq")) == (1, 5)
    assert attr(stop, "loopguard.finding.count") == 5
    assert attr(stop, "loopguard.finding.span_ids") == [run.hex(s) for s in range(1, 6)]
    assert [link.span_id.hex() for link in stop.links] == [run.hex(s) for s in range(1, 6)]
    assert [attr(e, "loopguard.seq") for e in stop.events if e.name == "loopguard.call"] == [1, 2, 3, 4, 5]
    assert attr(stop, "loopguard.tool.name") == "lookup_order"
    assert attr(stop, "loopguard.args.digest") == TaggedRun.ARGS
    assert attr(stop, "loopguard.run.id") == run.run_id
    assert attr(stop, "loopguard.policy.version")

    # now the root arrives: the run completes and is summarised once
    channel, stub = export_stub(receiver.port)
    stub.Export(request_of([run.root()]), timeout=10)
    channel.close()
    summary = wait_for(lambda: sink.runs(), what="run summary")[0]
    assert attr(summary, "loopguard.run.outcome") == "scored"
    assert attr(summary, "loopguard.score.tool_calls") == 6
    assert attr(summary, "loopguard.score.first_stop_seq") == 5


def _settled_findings(sink: Sink, receiver: ReceiverThread, run: TaggedRun) -> list[tuple[Any, ...]]:
    wait_for(lambda: _stop_repeat(sink), what="stop repeat finding")
    time.sleep(0.3)  # nothing more may follow from these calls
    return read_findings(sink)  # folded or one by one, as it arrived


def test_out_of_order_arrival_gives_the_same_findings(sink: Sink) -> None:
    in_order, shuffled = Sink(), sink
    try:
        results = []
        for target, seqs in ((in_order, [1, 2, 3, 4, 5]), (shuffled, [3, 1, 2, 5, 4])):
            receiver = ReceiverThread(make_config(target.port, **OPEN))
            try:
                run = TaggedRun(seed=7)  # same ids both times
                _send(receiver.port, run, seqs)
                results.append(_settled_findings(target, receiver, run))
                assert receiver.running.metrics.get("conflicts_total") == 0
            finally:
                receiver.stop()
        assert results[0] == results[1]
        assert ("repeat", "stop", 1, 5, 5, tuple(run.hex(s) for s in range(1, 6)), 3) in results[1]
        assert not [k for k in results[1] if k[0] in ("integrity_conflict", "incomplete_trace")]
    finally:
        in_order.stop()


def test_a_missing_call_makes_the_run_incomplete_after_gap_wait(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, gap_wait_seconds=1.0, **OPEN))
    try:
        run = TaggedRun(seed=11)
        started = time.monotonic()
        _send(receiver.port, run, [1, 2, 4, 5, 6])
        gap = wait_for(lambda: findings_of(sink, kind="incomplete_trace"), what="incomplete_trace finding")[0]
        assert time.monotonic() - started >= 1.0  # not before gap_wait_seconds
        assert (attr(gap, "loopguard.finding.first_seq"), attr(gap, "loopguard.finding.last_seq")) == (3, 3)
        assert attr(gap, "loopguard.finding.count") == 1
        assert "3" in attr(gap, "loopguard.finding.reason")
        assert gap.trace_id == run.trace_id
        # judging resumes after the gap; the root completes the run
        channel, stub = export_stub(receiver.port)
        stub.Export(request_of([run.root()]), timeout=10)
        channel.close()
        summary = wait_for(lambda: sink.runs(), what="run summary")[0]
        assert attr(summary, "loopguard.run.outcome") == "incomplete_trace"
        assert attr(summary, "loopguard.score.scorable") is False
        assert attr(summary, "loopguard.run.id") == run.run_id
        assert len(findings_of(sink, kind="incomplete_trace")) == 1
    finally:
        receiver.stop()


def test_no_loop_is_claimed_across_a_missing_call_but_one_after_it_is(sink: Sink) -> None:
    """Calls 1, 2, 4-8 of one action: the missing call 3 could have been anything, so streaks
    start again at 4 (the audit refuses to score such a run at all; the receiver, judging
    live, still reports a loop whose evidence lies wholly after the gap)."""
    receiver = ReceiverThread(make_config(sink.port, gap_wait_seconds=0.5, **OPEN))
    try:
        run = TaggedRun(seed=12)
        _send(receiver.port, run, [1, 2, 4, 5, 6, 7, 8])
        wait_for(lambda: [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "stop"],
                 what="the repeat after the gap")
        repeats = sorted((attr(f, "loopguard.finding.first_seq"), attr(f, "loopguard.finding.last_seq"),
                          attr(f, "loopguard.finding.severity")) for f in findings_of(sink, kind="repeat"))
        # One loop, one finding (issue 29): the warn at 6 is folded into the stop when they leave
        # together (judged at one tick after the gap), else the stop names the warn that left.
        (stop,) = [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "stop"]
        assert attr(stop, "loopguard.finding.warned_at_seq") == 6
        if repeats == [(4, 8, "stop")]:
            assert attr(stop, "loopguard.finding.warn_span_id") is None
        else:
            assert repeats == [(4, 6, "warn"), (4, 8, "stop")]
            (warn,) = [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "warn"]
            assert attr(stop, "loopguard.finding.warn_span_id") == warn.span_id.hex()
        for f in findings_of(sink, exclude=("incomplete_trace",)):
            assert attr(f, "loopguard.finding.first_seq") > 3, f  # nothing spans the gap
    finally:
        receiver.stop()


def test_two_different_spans_with_one_seq_are_an_integrity_conflict(sink: Sink, receiver: ReceiverThread) -> None:
    run = TaggedRun(seed=13)
    _send(receiver.port, run, [1, 2])
    impostor = run.call(2, span_id=b"\x0b" * 8, args="c" * 32)  # another span claims seq 2
    channel, stub = export_stub(receiver.port)
    stub.Export(request_of([impostor]), timeout=10)
    conflict = wait_for(lambda: findings_of(sink, kind="integrity_conflict"), what="integrity_conflict")[0]
    assert attr(conflict, "loopguard.finding.first_seq") == 2
    assert attr(conflict, "loopguard.finding.span_ids") == [(b"\x0b" * 8).hex()]
    assert "2" in attr(conflict, "loopguard.finding.reason")
    assert receiver.running.metrics.get("conflicts_total") == 0  # distinct span ids: not a dedupe conflict
    assert len([s for s in sink.spans() if s.span_id == b"\x0b" * 8]) == 1  # still forwarded
    stub.Export(request_of([run.root()]), timeout=10)
    channel.close()
    summary = wait_for(lambda: sink.runs(), what="run summary")[0]
    assert attr(summary, "loopguard.run.outcome") == "integrity_error"


def test_different_key_ids_in_one_run_are_an_integrity_conflict(sink: Sink, receiver: ReceiverThread) -> None:
    run = TaggedRun(seed=17)
    _send(receiver.port, run, [1, 2])
    run.key_id = "kid-rotated-2"
    _send(receiver.port, run, [3])
    conflict = wait_for(lambda: findings_of(sink, kind="integrity_conflict"), what="integrity_conflict")[0]
    assert "kid-rotated-2" in attr(conflict, "loopguard.finding.reason")
    assert "kid-test-1" in attr(conflict, "loopguard.finding.reason")
