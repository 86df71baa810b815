"""Late calls are never silent (issue 27): through real gRPC servers, calls of a run that come
after it was judged (past root_grace_seconds) are judged with it again: the findings they
complete reach the backend, and the summary is issued again as a revision of the first; past
the bound, or after a restart, a new summary marks the first verdict partial. A run whose calls
all came late still gets a summary. (tests/assembly/test_late_revisions.py pins the rule down
with a clock the test moves.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.receiver.runs import assembly

from .agent import LOOP, encode, record_spans
from .harness import (ReceiverThread, Sink, TaggedRun, app_spans, attr, export_stub, findings_of, make_config, request_of,
                      wait_for)

GRACE = 0.2


def _send(receiver: ReceiverThread, spans: list[Any], *, encoded: bool = False) -> None:
    channel, stub = export_stub(receiver.port)
    try:
        response = stub.Export(encode(spans) if encoded else request_of(spans), timeout=10)
        assert not response.HasField("partial_success")
    finally:
        channel.close()


def _revision(summary: Any) -> tuple[Any, Any, Any]:
    return (attr(summary, "loopguard.run.revision"), attr(summary, "loopguard.run.revises"),
            attr(summary, "loopguard.run.late_calls"))


def _kinds(sink: Sink) -> list[tuple[Any, Any]]:
    return sorted((attr(f, "loopguard.finding.kind"), attr(f, "loopguard.finding.severity")) for f in findings_of(sink))


def _nothing_waits(receiver: ReceiverThread) -> bool:
    """No late input is waiting to be judged: no summary can follow."""
    late = receiver.running.assembler._late  # noqa: SLF001
    return receiver.sync(lambda: not late._waiting)  # noqa: SLF001


@pytest.mark.parametrize("findings_only", [False, True], ids=["inline", "findings-only"])
def test_the_last_calls_after_the_grace_get_their_findings_and_a_revised_summary(
        sink: Sink, findings_only: bool) -> None:
    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=GRACE, findings_only=findings_only))
    run = TaggedRun()
    try:
        _send(receiver, [run.call(1), run.call(2), run.root()])
        (first,) = wait_for(lambda: sink.runs(), what="the run's first summary")
        assert attr(first, "loopguard.score.tool_calls") == 2 and _revision(first) == (None, None, None)
        assert findings_of(sink) == []
        _send(receiver, [run.call(3), run.call(4), run.call(5)])  # after the run was judged
        wait_for(lambda: len(sink.runs()) == 2, what="the revised summary")
        revised = sink.runs()[1]
        assert _revision(revised) == (2, first.span_id.hex(), 3)
        assert attr(revised, "loopguard.score.tool_calls") == 5 and revised.trace_id == run.trace_id
        # One loop, one finding (issue 29): judged again together, the repeat's warn folds into its
        # stop and the no_progress over the same calls rides on it as an event.
        assert _kinds(sink) == [("repeat", "stop")]
        (stop,) = findings_of(sink)
        assert attr(stop, "loopguard.finding.warned_at_seq") == 3
        assert sorted(attr(stop, "loopguard.finding.episode_kinds")) == ["no_progress", "repeat"]
        assert {f.trace_id for f in findings_of(sink)} == {run.trace_id}
        metrics = receiver.running.metrics
        assert metrics.get("late_spans_total") == 3 and metrics.get("run_revisions_total") == 1
        forwarded = {s.span_id for s in app_spans(sink)}
        late = {run.span_ids[seq] for seq in (3, 4, 5)}
        assert (forwarded >= late) if not findings_only else not forwarded  # late spans still go on
    finally:
        receiver.stop()


def test_a_trace_whose_calls_all_came_late_gets_a_summary(sink: Sink) -> None:
    """The root and the model spans first: the run completes with no call (no summary then);
    its tool calls, recorded with the real SDK, come after."""
    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=GRACE))
    _, spans = record_spans(LOOP)
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    try:
        _send(receiver, [s for s in spans if s not in tools], encoded=True)
        wait_for(lambda: receiver.running.metrics.get("runs_completed_total") == 1, what="the run completed")
        assert sink.runs() == []
        _send(receiver, tools, encoded=True)
        (summary,) = wait_for(lambda: sink.runs(), what="a summary of the late calls")
        assert attr(summary, "loopguard.score.tool_calls") == 6 and _revision(summary) == (None, None, 6)
        assert ("repeat", "stop") in _kinds(sink)
    finally:
        receiver.stop()


def test_past_the_bound_a_summary_marks_the_first_verdict_partial(
        sink: Sink, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assembly, "MAX_REVISIONS", 0)  # no revision allowed: the first late call is past it
    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=GRACE))
    run = TaggedRun()
    try:
        _send(receiver, [run.call(1), run.call(2), run.root()])
        (first,) = wait_for(lambda: sink.runs(), what="the run's first summary")
        _send(receiver, [run.call(3)])
        wait_for(lambda: len(sink.runs()) == 2, what="the summary marking the verdict partial")
        marked = sink.runs()[1]
        assert attr(marked, "loopguard.score.partial") is True
        assert attr(marked, "loopguard.run.outcome") == "incomplete_trace"
        assert _revision(marked) == (2, first.span_id.hex(), 1)
        assert _kinds(sink) == [("incomplete_trace", "warn")]
        assert receiver.running.metrics.get("runs_marked_partial_total") == 1
    finally:
        receiver.stop()


def test_negative_control_a_run_without_late_calls_has_one_summary_and_no_revision(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=GRACE))
    run = TaggedRun()
    try:
        _send(receiver, [run.call(seq) for seq in range(1, 6)] + [run.root()])
        wait_for(lambda: sink.runs(), what="the run's summary")
        wait_for(lambda: _nothing_waits(receiver), what="nothing left to judge")
        (summary,) = sink.runs()
        assert _revision(summary) == (None, None, None)
        metrics = receiver.running.metrics
        assert metrics.get("run_revisions_total") == 0 and metrics.get("late_spans_total") == 0
    finally:
        receiver.stop()


def test_after_a_restart_a_late_call_marks_the_verdict_of_the_previous_process_partial(
        sink: Sink, tmp_path: Path) -> None:
    """The snapshot carries the late cache (which traces were judged), not completed runs'
    inputs: the new process cannot judge the run again, so it says its verdict is partial."""
    config = make_config(sink.port, root_grace_seconds=GRACE, state_dir=str(tmp_path))
    run = TaggedRun()
    receiver = ReceiverThread(config)
    try:
        _send(receiver, [run.call(1), run.call(2), run.root()])
        wait_for(lambda: sink.runs(), what="the run's first summary")
    finally:
        receiver.stop()
    receiver = ReceiverThread(config)
    try:
        _send(receiver, [run.call(3)])
        wait_for(lambda: len(sink.runs()) == 2, what="the summary marking the verdict partial")
        marked = sink.runs()[1]
        assert attr(marked, "loopguard.score.partial") is True and _revision(marked) == (None, None, 1)
        assert marked.trace_id == run.trace_id
    finally:
        receiver.stop()
