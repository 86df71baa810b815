"""A run whose root span never arrives (issue 27): lost with the spans a sender's full queue drops,
or with a crash. Through a real gRPC receiver: the run still closes, at idle_timeout_seconds, and
its summary is marked `incomplete_trace` (unscorable) when its calls' parent never arrived either,
so a run that lost its last calls with its root is never scored as a whole one. Controls: the same
calls with their root, and with their parent present but no root (a root in another service, a
run keyed by a conversation), are judged as before."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from otel_loopguard.receiver.runs.restart import PARENTS_LOST

from receiver.harness import ReceiverThread, Sink, TaggedRun, attr, export_stub, findings_of, make_config, \
    make_span, request_of, wait_for

IDLE = 1.0


@pytest.fixture()
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.stop()


def _send(receiver: ReceiverThread, spans: list[Any]) -> None:
    channel, stub = export_stub(receiver.port)
    try:
        stub.Export(request_of(spans), timeout=10)
    finally:
        channel.close()


def _judged(receiver: ReceiverThread, sink: Sink) -> tuple[Any, list[Any]]:
    (summary,) = wait_for(lambda: sink.runs(), what="the run's summary", timeout=20)
    return summary, findings_of(sink, kind="incomplete_trace")


def _healthy_calls(run: TaggedRun, upto: int) -> list[Any]:
    """Calls 1..upto, each a different lookup: nothing to flag (a passing run when whole)."""
    return [run.call(seq, args=f"{seq:032x}", result=f"{seq:032x}") for seq in range(1, upto + 1)]


def test_a_run_that_lost_its_root_and_last_calls_is_marked_not_scored(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=IDLE))
    run = TaggedRun()
    try:
        _send(receiver, _healthy_calls(run, 3))  # calls 4-6 and the root were dropped by the sender
        summary, marks = _judged(receiver, sink)
        assert attr(summary, "loopguard.run.outcome") == "incomplete_trace"
        assert attr(summary, "loopguard.score.scorable") is False
        assert [attr(f, "loopguard.finding.reason") for f in marks] == [PARENTS_LOST]
    finally:
        receiver.stop()


def test_control_the_same_calls_with_their_root_are_scored(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=IDLE))
    run = TaggedRun()
    try:
        _send(receiver, [*_healthy_calls(run, 3), run.root()])
        summary, marks = _judged(receiver, sink)
        assert attr(summary, "loopguard.run.outcome") == "scored" and marks == []
    finally:
        receiver.stop()


def test_control_no_root_but_the_calls_parent_came_is_scored(sink: Sink) -> None:
    """The agent's top span has a parent in another service (never sent here): it is no root, so
    the run closes at the idle timeout, but its calls' parent came: nothing says a call is missing."""
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=IDLE))
    run = TaggedRun()
    top = make_span(run.trace_id, run.root_id, "invoke_agent support", parent=b"\x07" * 8, start=run.t0,
                    end=run.t0 + 100 * 1_000_000_000)
    try:
        _send(receiver, [*_healthy_calls(run, 3), top])
        summary, marks = _judged(receiver, sink)
        assert attr(summary, "loopguard.run.outcome") == "scored" and marks == []
    finally:
        receiver.stop()


def test_control_a_conversation_keyed_run_without_root_is_scored(sink: Sink) -> None:
    """A run keyed by a conversation id has no root of its own: closing at the idle timeout is its
    normal end, never a mark (its calls' parent is not asked for)."""
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=IDLE))
    run = TaggedRun(run_id="conversation-42")
    try:
        _send(receiver, _healthy_calls(run, 3))
        summary, marks = _judged(receiver, sink)
        assert attr(summary, "loopguard.run.outcome") == "scored" and marks == []
    finally:
        receiver.stop()
