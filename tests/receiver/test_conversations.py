"""Runs keyed by a conversation, not a trace: a turn that comes after the run went idle is
judged as a new run that goes on with the conversation's sequence; spans of the traces a
completed run covered stay late, whatever else happens to the conversation."""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from .harness import RUN, ReceiverThread, Sink, TaggedRun, attr, export_stub, findings_of, make_config, request_of, wait_for

IDLE = 0.3


@pytest.fixture
def receiver(sink: Sink) -> Iterator[ReceiverThread]:
    r = ReceiverThread(make_config(sink.port, idle_timeout_seconds=IDLE, gap_wait_seconds=30.0))
    yield r
    r.stop()


def _send(receiver: ReceiverThread, spans: list[Any]) -> None:
    channel, stub = export_stub(receiver.port)
    with channel:
        stub.Export(request_of(spans), timeout=10)


def _summaries(sink: Sink, n: int) -> list[Any]:
    return wait_for(lambda: len(sink.runs()) >= n and sink.runs(), what=f"{n} run summaries")


def test_a_turn_after_the_run_went_idle_is_judged_and_goes_on_with_the_sequence(sink: Sink,
                                                                                receiver: ReceiverThread) -> None:
    first, later = TaggedRun(run_id="conversation-1", seed=61), TaggedRun(run_id="conversation-1", seed=62)
    _send(receiver, [first.call(1), first.call(2, args="2" * 32)])
    _summaries(sink, 1)  # idle: the first run completed
    _send(receiver, [later.call(seq) for seq in range(3, 9)])  # the user came back: a loop in this turn
    stops = wait_for(lambda: [f for f in findings_of(sink, kind="repeat")
                              if attr(f, "loopguard.finding.severity") == "stop"], what="the later turn's loop")
    assert (attr(stops[0], "loopguard.finding.first_seq"), attr(stops[0], "loopguard.finding.last_seq")) == (3, 7)
    assert not findings_of(sink, kind="incomplete_trace")  # seq 3 follows on: no gap 1-2
    assert receiver.running.metrics.get("late_spans_total") == 0


def test_late_spans_of_a_covered_trace_stay_late_while_and_after_the_conversation_resumes(
        sink: Sink, receiver: ReceiverThread) -> None:
    first, later = TaggedRun(run_id="conversation-2", seed=63), TaggedRun(run_id="conversation-2", seed=64)
    _send(receiver, [first.call(1), first.call(2, args="2" * 32), first.call(4, args="4" * 32)])
    _summaries(sink, 1)
    _send(receiver, [later.call(5, args="5" * 32), later.call(6, args="6" * 32)])
    _send(receiver, [first.call(3, args="3" * 32)])  # the first trace's straggler, while the turn is open
    assert receiver.running.metrics.get("late_spans_total") == 1
    summaries = _summaries(sink, 2)
    assert attr(summaries[-1], "loopguard.run.outcome") != "integrity_error"
    assert not findings_of(sink, kind="integrity_conflict")
    _send(receiver, [first.call(3, args="3" * 32, span_id=b"\x33" * 8)])  # after both completed: late still
    assert receiver.running.metrics.get("late_spans_total") == 2
    time.sleep(IDLE * 3)
    # No third run opened by the straggler: the first run is judged again with it (issue 27:
    # revised summaries, tests/receiver/test_late_calls.py).
    assert len([s for s in sink.runs() if attr(s, "loopguard.run.revision") is None]) == 2


def test_a_conversation_whose_numbering_started_again_is_judged_from_one(sink: Sink, receiver: ReceiverThread) -> None:
    """A restarted processor numbers the conversation from 1 again: the resumed run follows."""
    first, later = TaggedRun(run_id="conversation-3", seed=65), TaggedRun(run_id="conversation-3", seed=66)
    _send(receiver, [first.call(seq, args=f"{seq}" * 32) for seq in (1, 2, 3)])
    _summaries(sink, 1)
    _send(receiver, [later.call(seq) for seq in range(1, 6)])
    wait_for(lambda: [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "stop"],
             what="the restarted turn's loop")
    assert not findings_of(sink, kind="integrity_conflict")


def test_any_run_id_completes_even_one_that_looks_like_a_trace_id(sink: Sink, receiver: ReceiverThread) -> None:
    for seed, run_id in ((67, "session-user-1234-2026-12-01-abc"), (68, "0" * 31 + "g"), (69, "ab" * 16)):
        run = TaggedRun(run_id=run_id, seed=seed)
        _send(receiver, [run.call(1)])
    summaries = _summaries(sink, 3)
    assert sorted(attr(s, "loopguard.run.id") for s in summaries) == sorted(
        ["session-user-1234-2026-12-01-abc", "0" * 31 + "g", "ab" * 16])
    assert receiver.running.metrics.get("internal_errors_total") == 0


def test_a_restarted_numbering_whose_first_call_ends_second_still_starts_at_one(sink: Sink,
                                                                               receiver: ReceiverThread) -> None:
    """Spans are exported in end order: after a processor restart seq 2 may come before seq 1."""
    first, later = TaggedRun(run_id="conversation-4", seed=70), TaggedRun(run_id="conversation-4", seed=71)
    _send(receiver, [first.call(seq, args=f"{seq}" * 32) for seq in (1, 2, 3)])
    _summaries(sink, 1)
    _send(receiver, [later.call(2, args="b" * 32), later.call(1, args="a" * 32), later.call(3, args="c" * 32)])
    summaries = _summaries(sink, 2)
    assert attr(summaries[-1], "loopguard.run.outcome") == "scored"
    assert not findings_of(sink, kind="integrity_conflict")


def test_a_straggler_after_the_late_cache_expired_is_a_gap_not_a_conflict(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=IDLE, late_cache_seconds=0.5,
                                          gap_wait_seconds=30.0))
    try:
        run = TaggedRun(seed=72)  # keyed by its trace
        _send(receiver, [run.call(seq, args=f"{seq}" * 32) for seq in (1, 2, 4)])
        _summaries(sink, 1)
        time.sleep(0.6)  # past late_cache_seconds: the straggler opens a run of its own
        _send(receiver, [run.call(3, args="3" * 32)])
        _summaries(sink, 2)
        assert not findings_of(sink, kind="integrity_conflict")
    finally:
        receiver.stop()


def test_a_run_sharing_a_trace_is_not_made_late_when_the_other_completes(sink: Sink) -> None:
    """Model spans without the conversation attribute form a run of their trace; when that run
    completes, the conversation's later calls in the same trace are still judged."""
    from .harness import make_span

    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=30.0, root_grace_seconds=0.2,
                                          gap_wait_seconds=30.0))
    try:
        conversation = TaggedRun(run_id="conversation-5", seed=73)
        model = make_span(conversation.trace_id, b"\x44" * 8, "chat m", parent=conversation.root_id,
                          start=conversation.t0, end=conversation.t0 + 1, attributes={
                              "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10})
        _send(receiver, [model, conversation.call(1), conversation.root()])  # the trace's own run ends
        time.sleep(0.6)
        _send(receiver, [conversation.call(seq) for seq in range(2, 7)])
        wait_for(lambda: [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "stop"],
                 what="the conversation's loop judged")
        assert receiver.running.metrics.get("late_spans_total") == 0
    finally:
        receiver.stop()
