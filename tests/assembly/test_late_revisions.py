"""Late calls are never silent (receiver/runs/late.py, issue 27): tool calls of a run that come
after it was judged are judged with it again, once they stop coming for root_grace_seconds;
the findings they complete are sent (never one sent before) and the summary is issued again
as a revision of the first; past the bound, a summary marks the first verdict partial.

In process, with the clock moved by the test (tests/receiver/test_late_calls.py does the
same through real gRPC servers).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_loopguard.calls import ModelCall
from otel_loopguard.receiver.runs import late

from .test_run_assembler import GRACE, IDLE, LATE, MS, STEP, T0, TRACE, TRACE_2, Rig, attrs, decoded, finding_kinds, root
from .test_run_assembler import sid, summaries, tool


def _judged(rig: Rig, *seqs: int, at: float = 100.0, **kw: Any) -> Span:
    """A run of these calls, its root ended at `at`, judged a grace later: its one summary."""
    rig.clock.now = at
    for seq in seqs:
        rig.accept(tool(seq, **kw))
    rig.accept(root(kw.get("trace", TRACE)))
    (summary,) = summaries(rig.at(at + GRACE))
    return summary


def _late(rig: Rig, *calls: Any, at: float) -> None:
    rig.clock.now = at
    for call in calls:
        assert rig.accept(call) == []  # nothing at once: judged once they stop coming


def _revision(summary: Span) -> tuple[Any, Any, Any]:
    a = attrs(summary)
    return a.get("loopguard.run.revision"), a.get("loopguard.run.revises"), a.get("loopguard.run.late_calls")


def test_calls_after_the_grace_are_judged_with_their_run_and_the_summary_is_revised() -> None:
    rig = Rig()
    first = _judged(rig, 1, 2)
    assert attrs(first)["loopguard.score.tool_calls"] == 2 and _revision(first) == (None, None, None)
    _late(rig, tool(3), tool(4), tool(5), at=103.0)
    assert rig.at(103.0 + GRACE - 0.01) == []  # still coming, maybe
    out = rig.at(103.0 + GRACE)
    assert finding_kinds(out) == [("repeat", "warn"), ("no_progress", "warn"), ("repeat", "stop")]
    (revised,) = summaries(out)
    assert _revision(revised) == (2, first.span_id.hex(), 3)
    assert attrs(revised)["loopguard.score.tool_calls"] == 5
    assert attrs(revised)["loopguard.run.outcome"] == "scored"
    assert (revised.trace_id, revised.parent_span_id) == (first.trace_id, first.parent_span_id)
    assert rig.count("late_spans_total") == 3 and rig.count("run_revisions_total") == 1
    assert rig.count("findings_total", kind="repeat", tool="lookup") == 2


def test_a_revision_sends_only_the_findings_not_sent_before() -> None:
    rig = Rig()
    rig.clock.now = 100.0
    sent = [finding_kinds(rig.accept(tool(seq))) for seq in (1, 2, 3)]
    assert sent[2] == [("repeat", "warn")]
    rig.accept(root())
    first = summaries(rig.at(102.0))[0]
    _late(rig, tool(4), tool(5), at=103.0)
    out = rig.at(103.0 + GRACE)
    assert finding_kinds(out) == [("no_progress", "warn"), ("repeat", "stop")]  # not repeat/warn again
    (revised,) = summaries(out)
    assert _revision(revised) == (2, first.span_id.hex(), 2)
    assert attrs(revised)["loopguard.score.findings.repeat"] == 2  # the score counts every finding of the run


def test_late_calls_that_come_together_are_judged_once_and_later_ones_again() -> None:
    rig = Rig()
    first = _judged(rig, 1)
    _late(rig, tool(2), at=103.0)
    _late(rig, tool(3), at=103.0 + GRACE - 0.5)
    out = rig.at(103.0 + GRACE)
    (second,) = summaries(out)
    assert _revision(second) == (2, first.span_id.hex(), 2) and finding_kinds(out) == [("repeat", "warn")]
    _late(rig, tool(4), at=110.0)
    (third,) = summaries(rig.at(110.0 + GRACE))
    assert _revision(third) == (3, first.span_id.hex(), 3)  # each revision names the first summary


def test_a_run_whose_calls_all_came_late_gets_a_summary() -> None:
    """Issue 27: a trace whose calls all came late closed with 0 calls and no summary."""
    rig = Rig()
    rig.clock.now = 100.0
    rig.accept(decoded(TRACE, sid(30), STEP, run_id=TRACE.hex(), model=ModelCall(turn=0)), root())
    assert summaries(rig.at(102.0)) == []  # no call yet: nothing to summarise
    assert rig.count("runs_completed_total") == 1
    _late(rig, tool(1), tool(2), tool(3), at=104.0)
    out = rig.at(104.0 + GRACE)
    assert finding_kinds(out) == [("repeat", "warn")]
    (summary,) = summaries(out)
    assert _revision(summary) == (None, None, 3)  # the run's first summary: it revises none
    assert attrs(summary)["loopguard.score.tool_calls"] == 3 and rig.count("run_revisions_total") == 0
    _late(rig, tool(4), at=110.0)
    (revised,) = summaries(rig.at(110.0 + GRACE))
    assert _revision(revised) == (2, summary.span_id.hex(), 4)


def test_a_gap_the_late_calls_fill_is_judged_whole_in_the_revision() -> None:
    rig = Rig()
    rig.clock.now = 100.0
    for seq in (1, 2, 4, 5):
        rig.accept(tool(seq))
    rig.accept(root())
    out = rig.at(102.0)
    assert finding_kinds(out) == [("incomplete_trace", "warn")]
    (first,) = summaries(out)
    assert attrs(first)["loopguard.run.outcome"] == "incomplete_trace"
    _late(rig, tool(3), at=103.0)
    out = rig.at(103.0 + GRACE)
    assert finding_kinds(out) == [("repeat", "warn"), ("no_progress", "warn"), ("repeat", "stop")]
    (revised,) = summaries(out)
    assert attrs(revised)["loopguard.run.outcome"] == "scored" and _revision(revised)[0] == 2


def test_calls_without_a_sequence_are_judged_again_in_start_order() -> None:
    rig = Rig()
    rig.clock.now = 100.0
    for n in (1, 3):  # the call that started second comes late
        rig.accept(tool(0, span=sid(n), start=T0 + n * MS, dense=False))
    rig.accept(root())
    assert finding_kinds(rig.at(102.0)) == []
    _late(rig, tool(0, span=sid(2), start=T0 + 2 * MS, dense=False), at=103.0)
    out = rig.at(103.0 + GRACE)
    (warn,) = [s for s in out if "loopguard.finding.kind" in attrs(s)]
    assert attrs(warn)["loopguard.finding.span_ids"] == [sid(1).hex(), sid(2).hex(), sid(3).hex()]


def test_a_late_model_span_alone_revises_the_run() -> None:
    """A model span says where a decision ends (it groups calls into turns, it counts toward
    the turn budget): arriving late, it is judged with the run as a late call is (the sharded
    test under load found runs whose last late spans were model spans only, left unrevised)."""
    rig = Rig()
    _judged(rig, 1, 2)
    _late(rig, decoded(TRACE, sid(31), STEP, run_id=TRACE.hex(), model=ModelCall(turn=0)), at=103.0)
    (revised,) = summaries(rig.at(110.0))
    assert _revision(revised)[0] == 2 and rig.count("late_spans_total") == 1


def test_negative_control_without_late_calls_a_run_has_exactly_one_summary() -> None:
    rig = Rig()
    _judged(rig, 1, 2, 3)
    for now in (104.0, 110.0, 200.0, 100.0 + LATE + 10):
        assert summaries(rig.at(now)) == []
    assert rig.count("run_revisions_total") == 0 and rig.count("runs_marked_partial_total") == 0


def test_past_the_revision_bound_the_verdict_is_marked_partial_once() -> None:
    rig = Rig()
    first = _judged(rig, 1)
    at = 103.0
    for n in range(late.MAX_REVISIONS):
        _late(rig, tool(2 + n, args={"q": n}), at=at)
        (revised,) = summaries(rig.at(at + GRACE))
        assert _revision(revised)[0] == 2 + n
        at += 10.0
    _late(rig, tool(10, args={"q": "past"}), tool(11, args={"q": "past"}), at=at)
    out = rig.at(at + GRACE)
    (marked,) = summaries(out)
    a = attrs(marked)
    assert a["loopguard.run.outcome"] == "incomplete_trace" and a["loopguard.score.partial"] is True
    assert _revision(marked) == (late.MAX_REVISIONS + 2, first.span_id.hex(), late.MAX_REVISIONS + 2)
    assert finding_kinds(out) == [("incomplete_trace", "warn")]
    assert rig.count("runs_marked_partial_total") == 1
    # said once: later late calls are counted only
    _late(rig, tool(12, args={"q": "later"}), at=at + 10)
    assert rig.at(at + 10 + GRACE) == [] and rig.count("late_spans_total") == late.MAX_REVISIONS + 3


def test_a_run_whose_inputs_were_given_up_for_memory_is_marked_partial() -> None:
    """The journals of completed runs share a bound: the oldest go first, and a run without its
    inputs is marked, not judged again."""
    rig = Rig(memory_limit_mib=96)
    first = _judged(rig, 1, 2)
    bound = rig.assembler._late._max_entries  # noqa: SLF001
    _judged(rig, *range(1, bound + 2), at=110.0, trace=TRACE_2, args={"q": "big"})
    _late(rig, tool(3), at=120.0)
    out = rig.at(120.0 + GRACE)
    (marked,) = summaries(out)
    assert attrs(marked)["loopguard.score.partial"] is True and _revision(marked)[:2] == (2, first.span_id.hex())
    assert rig.assembler._late.entries <= bound  # noqa: SLF001


def test_a_late_call_of_a_run_forgotten_by_a_restart_is_marked_partial() -> None:
    """After a restart the late cache says the trace was judged (snapshot.py), but not its inputs."""
    rig = Rig()
    rig.assembler.restore_late_cache([(TRACE.hex(), 3)], [(TRACE.hex(), TRACE, 1.0)], now=100.0)
    _late(rig, tool(3), at=101.0)
    out = rig.at(101.0 + GRACE)
    (marked,) = summaries(out)
    a = attrs(marked)
    assert a["loopguard.score.partial"] is True and _revision(marked) == (None, None, 1)
    assert marked.trace_id == TRACE


def test_late_calls_waiting_at_shutdown_are_judged_then() -> None:
    rig = Rig()
    first = _judged(rig, 1, 2)
    _late(rig, tool(3), at=103.0)
    out = rig.assembler.flush(shutdown=True)
    assert finding_kinds(out) == [("repeat", "warn")]
    assert _revision(summaries(out)[0]) == (2, first.span_id.hex(), 1)


def test_verdicts_go_after_the_late_cache_and_the_run_id_opens_a_new_run() -> None:
    rig = Rig()
    _judged(rig, 1, 2)
    rig.at(102.0 + LATE)
    assert len(rig.assembler._late) == 0 and rig.assembler._late.entries == 0  # noqa: SLF001
    rig.accept(tool(3))
    assert list(rig.assembler.runs) == [TRACE.hex()] and rig.count("late_spans_total") == 0


def test_a_late_call_of_a_conversations_earlier_run_revises_that_run_not_the_later_one() -> None:
    """A conversation completes several runs of one id: a late call belongs to the run that
    covered its trace."""
    rig = Rig()
    rig.clock.now = 100.0
    for seq in (1, 2):
        rig.accept(tool(seq, run_id="conv-1"))
    (first,) = summaries(rig.at(100.0 + IDLE))
    rig.clock.now = 140.0
    rig.accept(tool(3, trace=TRACE_2, run_id="conv-1", args={"q": "other"}))
    (second,) = summaries(rig.at(140.0 + IDLE))
    _late(rig, tool(3, run_id="conv-1", span=sid(99)), at=175.0)
    out = rig.at(175.0 + GRACE)
    assert finding_kinds(out) == [("repeat", "warn")]
    (revised,) = summaries(out)
    assert _revision(revised) == (2, first.span_id.hex(), 1) and revised.trace_id == TRACE


def test_a_late_call_delivered_again_after_the_dedupe_forgot_it_is_one_call() -> None:
    rig = Rig()
    _judged(rig, 1, 2)
    _late(rig, tool(3), at=103.0)
    rig.at(103.0 + GRACE)
    _late(rig, tool(3), tool(4), at=110.0)  # 3 again (the receiver's dedupe window had passed), then 4
    out = rig.at(110.0 + GRACE)
    assert finding_kinds(out) == [("no_progress", "warn")]  # no integrity conflict over call 3
    (revised,) = summaries(out)
    assert attrs(revised)["loopguard.run.outcome"] == "scored" and attrs(revised)["loopguard.score.tool_calls"] == 4
