"""The receiver's RunAssembler in process (receiver/runs/assembly.py): which run a span joins,
when a run completes, which spans are late, what is counted and where each finding span
goes, driven with decoded spans as `receiver/ingest/decode.py` hands them over and a clock the
test moves.

`tests/receiver` checks the same behaviours through a real gRPC server; these tests pin
them down exactly (the boundaries of every timer, every metric) and run where mutation
testing's forked workers can (docs/testing.md).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Optional, cast

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_loopguard.calls import GuardEvent, ModelCall, RawCall
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.otlp.values import attributes
from otel_loopguard.policy import Policy, policy_from_mapping
from otel_loopguard.receiver.runs import assembly
from otel_loopguard.receiver.ops import trim
from otel_loopguard.receiver.runs.assembly import RunAssembler
from otel_loopguard.receiver.config import ReceiverConfig
from otel_loopguard.receiver.ingest.decode import Decoded
from otel_loopguard.receiver.ops.metrics import Metrics

KEY = load_key(key=b"k" * 32)
TRACE = bytes.fromhex("0a" * 16)
TRACE_2 = bytes.fromhex("0b" * 16)
ROOT = bytes.fromhex("01" * 8)
STEP = bytes.fromhex("02" * 8)
MS = 1_000_000
T0 = 1_700_000_000_000_000_000
GRACE, IDLE, GAP_WAIT, LATE = 2.0, 30.0, 10.0, 300.0


def sid(n: int) -> bytes:
    return (0x1000 + n).to_bytes(8, "big")


class Clock:
    """The receiver's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def decoded(trace: bytes, span: bytes, parent: bytes = b"", start: int = T0, end: int = T0 + 1, **rest: Any) -> Decoded:
    return Decoded((0, 0, 0), trace + span, 0, trace, span, parent, start, end, **rest)


def tool(seq: int, *, name: str = "lookup", args: Any = None, result: Any = None, trace: bytes = TRACE,
         span: Optional[bytes] = None, parent: bytes = STEP, start: Optional[int] = None, end: Optional[int] = None,
         dense: bool = True, run_id: Optional[str] = None, finished: bool = True) -> Decoded:
    """A tool call span as decode() reads it: `dense` as the processor's numbered calls,
    seq 0 as a call without loopguard.seq (an instrumentation's span)."""
    span = span or sid(seq)
    start = T0 + seq * 10 * MS if start is None else start
    end = start + 5 * MS if end is None else end
    raw = RawCall(seq=seq, tool=name, arguments={"q": "same"} if args is None else args,
                  result={"rows": []} if result is None else result, finished=finished, span_id=span.hex(),
                  start_ns=start, end_ns=end, trace_id=trace.hex(), parent_id=parent.hex() or None, seq_dense=dense)
    return decoded(trace, span, parent, start, end, run_id=run_id or trace.hex(), call=raw)


def root(trace: bytes = TRACE, span: bytes = ROOT, start: int = T0, end: int = T0 + 10_000 * MS) -> Decoded:
    return decoded(trace, span, b"", start, end)


def finding_kinds(spans: list[Span]) -> list[tuple[str, str]]:
    return [(a["loopguard.finding.kind"], a["loopguard.finding.severity"])
            for a in map(attrs, spans) if "loopguard.finding.kind" in a]


def summaries(spans: list[Span]) -> list[Span]:
    return [s for s in spans if "loopguard.run.outcome" in attrs(s)]


def attrs(span: Span) -> dict[str, Any]:
    return attributes(span.attributes)


class Rig:
    def __init__(self, policy: Optional[Policy] = None, **config: Any) -> None:
        self.clock = Clock()
        self.metrics = Metrics()
        settings: dict[str, Any] = dict(root_grace_seconds=GRACE, idle_timeout_seconds=IDLE, gap_wait_seconds=GAP_WAIT,
                        late_cache_seconds=LATE)
        settings.update(config)
        self.fp = Fingerprinter(KEY, policy or Policy())
        self.assembler = RunAssembler(self.fp, ReceiverConfig(**settings), self.metrics, clock=self.clock)

    def accept(self, *spans: Decoded) -> list[Span]:
        return self.assembler.accept(list(spans))

    def at(self, now: float) -> list[Span]:
        self.clock.now = now
        return self.assembler.tick()

    def count(self, name: str, **labels: str) -> float:
        return self.metrics.get(name, **labels)


def repeat_run(rig: Rig, n: int = 5, **kw: Any) -> list[Span]:
    out: list[Span] = []
    for seq in range(1, n + 1):
        out += rig.accept(tool(seq, **kw))
    return out


# -- judging as calls arrive ----------------------------------------------------------


def test_numbered_calls_are_judged_as_they_arrive_each_finding_placed_over_its_calls() -> None:
    rig = Rig()
    per_call = [finding_kinds(rig.accept(tool(seq))) for seq in range(1, 6)]
    assert per_call == [[], [], [("repeat", "warn")], [("no_progress", "warn")], [("repeat", "stop")]]
    assert rig.assembler.buffered_calls == 0 and rig.count("buffered_calls") == 0
    assert rig.count("findings_total", kind="repeat", tool="lookup") == 2
    assert rig.count("findings_total", kind="no_progress", tool="") == 1
    assert rig.count("runs_open") == 1 and list(rig.assembler.runs) == [TRACE.hex()]


def test_before_the_root_is_seen_a_finding_goes_under_its_first_calls_parent_and_after_under_the_root() -> None:
    rig = Rig()
    out = repeat_run(rig, 3)
    (warn,) = out
    assert (warn.trace_id, warn.parent_span_id) == (TRACE, STEP)
    # over the three calls: from the first one's start to the last one's end
    assert (warn.start_time_unix_nano, warn.end_time_unix_nano) == (T0 + 10 * MS, T0 + 35 * MS)
    assert attrs(warn)["loopguard.finding.span_ids"] == [sid(1).hex(), sid(2).hex(), sid(3).hex()]
    assert rig.accept(root()) == []
    later = rig.accept(tool(4)) + rig.accept(tool(5))
    assert [s.parent_span_id for s in later] == [ROOT, ROOT]
    # the arguments of the repeated action are shown as judged
    assert '"arguments": "{\\"q\\": \\"same\\"}"' in attrs(later[1])["input.value"]


def test_a_run_completes_exactly_a_grace_after_its_root_span_ended() -> None:
    rig = Rig()
    repeat_run(rig, 5)
    rig.clock.now = 100.0
    rig.accept(root())
    assert rig.at(101.5) == [] and rig.assembler.runs
    done = rig.at(102.0)
    (summary,) = summaries(done)
    assert summary.name == "loopguard.run scored/fail"
    a = attrs(summary)
    assert (a["loopguard.run.id"], a["loopguard.run.outcome"], a["loopguard.run.clock_skew"]) == (TRACE.hex(), "scored", False)
    assert a["loopguard.score.tool_calls"] == 5
    # under the root, over the run's first to last call
    assert (summary.trace_id, summary.parent_span_id) == (TRACE, ROOT)
    assert (summary.start_time_unix_nano, summary.end_time_unix_nano) == (T0 + 10 * MS, T0 + 55 * MS)
    assert rig.assembler.runs == {}
    assert (rig.count("runs_open"), rig.count("runs_completed_total")) == (0, 1)
    assert rig.at(200.0) == []  # completed once


def test_a_root_seen_before_the_run_opened_still_ends_it() -> None:
    rig = Rig()
    rig.accept(root())  # at 100
    rig.clock.now = 101.0
    out = repeat_run(rig, 3)
    assert [s.parent_span_id for s in out] == [ROOT]  # the root was known when the finding was made
    assert summaries(rig.at(102.0))  # the grace counts from the root's arrival


def test_a_run_without_a_root_completes_after_the_idle_timeout_from_its_last_span_of_any_kind() -> None:
    rig = Rig()
    repeat_run(rig, 2)  # at 100
    rig.clock.now = 120.0
    assert rig.accept(decoded(TRACE, sid(50), STEP)) == []  # an ordinary span of the run's trace
    assert rig.at(130.0) == [] and rig.at(149.5) == []
    assert summaries(rig.at(150.0))
    assert rig.count("runs_completed_total") == 1


def test_a_run_keyed_by_a_conversation_goes_on_past_its_traces_root() -> None:
    rig = Rig()
    for seq in (1, 2, 3):
        rig.accept(tool(0, span=sid(seq), start=T0 + seq * MS, run_id="conv-1", dense=False))
    assert rig.assembler.buffered_calls == 3 and rig.count("buffered_calls") == 3
    rig.accept(root())  # the turn ended at 100
    assert rig.at(101.9) == []
    turn = rig.at(102.0)  # its calls judged a grace after the root, the run still open
    assert finding_kinds(turn) == [("repeat", "warn")] and not summaries(turn)
    assert list(rig.assembler.runs) == ["conv-1"] and rig.assembler.buffered_calls == 0
    # the next turn, in another trace: its calls wait for that trace's root
    rig.clock.now = 110.0
    for seq in (4, 5):
        rig.accept(tool(0, span=sid(seq), trace=TRACE_2, start=T0 + seq * MS, run_id="conv-1", dense=False))
    assert rig.at(115.0) == [] and rig.assembler.buffered_calls == 2
    rig.accept(root(TRACE_2))  # at 115
    assert finding_kinds(rig.at(117.0)) == [("no_progress", "warn"), ("repeat", "stop")]
    assert not summaries(rig.at(144.9))
    assert summaries(rig.at(145.0))  # idle 30 s after the last span


# -- held calls, gaps ----------------------------------------------------------------


def test_calls_without_a_number_are_held_counted_and_judged_when_the_run_completes() -> None:
    rig = Rig()
    for seq in (1, 2, 3):
        assert rig.accept(tool(0, span=sid(seq), start=T0 + seq * MS, dense=False)) == []
    assert rig.assembler.buffered_calls == 3 and rig.count("buffered_calls") == 3
    done = rig.assembler.flush()
    assert finding_kinds(done) == [("repeat", "warn")]
    assert len(summaries(done)) == 1
    assert rig.assembler.buffered_calls == 0 and rig.assembler.runs == {}


def test_a_gap_outliving_its_wait_is_reported_and_judging_goes_on_after_it() -> None:
    rig = Rig()
    rig.accept(tool(1, run_id="conv-1"))
    assert rig.accept(tool(3, run_id="conv-1")) == [] and rig.assembler.buffered_calls == 1  # waits for 2
    rig.clock.now = 108.0
    rig.accept(root())  # known, but the run is a conversation: its turn ends, the run goes on
    assert rig.at(109.9) == []
    out = rig.at(110.0)  # the gap's wait and the turn's grace end in the same tick
    (gap,) = out
    a = attrs(gap)
    assert (a["loopguard.finding.kind"], a["loopguard.finding.first_seq"], a["loopguard.finding.last_seq"]) == (
        "incomplete_trace", 2, 2)
    assert rig.assembler.buffered_calls == 0 and rig.count("buffered_calls") == 1  # the gauge is set on input
    # no call to place it by: under the root of the run's first trace, at the time it was made
    assert (gap.trace_id, gap.parent_span_id) == (TRACE, ROOT)
    assert gap.start_time_unix_nano == gap.end_time_unix_nano
    assert abs(gap.start_time_unix_nano - time.time_ns()) < 60 * 10**9
    rig.accept(tool(4, run_id="conv-1"))  # judged at once after the gap
    assert rig.assembler.buffered_calls == 0
    (summary,) = summaries(rig.assembler.flush())
    assert attrs(summary)["loopguard.run.outcome"] == "incomplete_trace"


def test_a_gap_in_a_run_whose_root_is_unknown_is_placed_at_the_trace_top() -> None:
    rig = Rig()
    rig.accept(tool(1), tool(3))
    (gap,) = rig.at(110.0)
    assert attrs(gap)["loopguard.finding.kind"] == "incomplete_trace"
    assert (gap.trace_id, gap.parent_span_id) == (TRACE, b"")


# -- late spans, resumed runs ----------------------------------------------------------


def test_spans_of_a_completed_run_are_late_until_the_cache_forgets_it_then_numbering_goes_on() -> None:
    rig = Rig()
    repeat_run(rig, 3)
    rig.accept(root())
    assert summaries(rig.at(102.0))
    rig.clock.now = 102.0 + LATE - 0.5
    assert rig.accept(tool(4)) == []
    assert rig.count("late_spans_total") == 1 and rig.assembler.runs == {}
    rig.clock.now = 102.0 + LATE
    assert rig.accept(tool(4, args={"q": "new"})) == []  # a new run, numbered on from 4: judged at once
    assert rig.assembler.buffered_calls == 0 and list(rig.assembler.runs) == [TRACE.hex()]
    assert rig.count("late_spans_total") == 1
    # the late call was judged with its run (a revised summary, tests/assembly/test_late_revisions.py)
    revised, (summary,) = _split_revisions(summaries(rig.assembler.flush()))
    assert [attrs(s)["loopguard.score.tool_calls"] for s in revised] == [4]
    assert attrs(summary)["loopguard.run.outcome"] == "scored" and attrs(summary)["loopguard.score.tool_calls"] == 1


def _split_revisions(spans: list[Span]) -> tuple[list[Span], list[Span]]:
    revised = [s for s in spans if "loopguard.run.revision" in attrs(s)]
    return revised, [s for s in spans if s not in revised]


def test_a_resumed_conversation_in_a_new_trace_is_a_new_run_numbered_on() -> None:
    rig = Rig()
    for seq in (1, 2):
        rig.accept(tool(seq, run_id="conv-1"))
    assert summaries(rig.at(130.0))  # idle
    assert rig.accept(tool(3, trace=TRACE_2, run_id="conv-1")) == []
    assert rig.count("late_spans_total") == 0 and rig.assembler.buffered_calls == 0
    # its old trace is still late for it
    assert rig.accept(tool(4, run_id="conv-1")) == [] and rig.count("late_spans_total") == 1


def test_a_conversation_resumes_numbered_on_after_the_receiver_repacked_its_tables() -> None:
    """receiver/ops/trim.py copies the completed runs' keys after a burst: nothing else changes."""
    rig = Rig()
    for seq in (1, 2):
        rig.accept(tool(seq, run_id="conv-1"))
    assert summaries(rig.at(130.0))  # idle
    rig.assembler.repack(trim.copied)
    assert rig.accept(tool(3, trace=TRACE_2, run_id="conv-1")) == []
    assert rig.count("late_spans_total") == 0 and rig.assembler.buffered_calls == 0  # 3 follows 2: judged at once


def test_a_completed_run_makes_only_its_own_spans_late_in_a_shared_trace() -> None:
    rig = Rig()
    rig.accept(tool(1, run_id="conv-a", span=sid(1)), tool(1, run_id="conv-b", span=sid(2)))
    rig.clock.now = 120.0
    rig.accept(tool(2, run_id="conv-b", span=sid(5), trace=TRACE_2))  # conv-b goes on in another trace
    done = rig.at(130.0)
    assert [attrs(s)["loopguard.run.id"] for s in summaries(done)] == ["conv-a"]
    judged = rig.accept(tool(3, run_id="conv-b", span=sid(3)))  # its third call: judged, not late
    assert finding_kinds(judged) == [("repeat", "warn")] and rig.count("late_spans_total") == 0
    assert rig.accept(tool(2, run_id="conv-a", span=sid(4))) == [] and rig.count("late_spans_total") == 1
    assert list(rig.assembler.runs) == ["conv-b"]


def test_spans_without_a_run_are_never_late_and_open_nothing() -> None:
    rig = Rig()
    assert rig.accept(decoded(TRACE, sid(9), STEP)) == []
    assert rig.assembler.runs == {} and rig.count("runs_open") == 0 and rig.count("late_spans_total") == 0


# -- what a run notes besides calls -------------------------------------------------------


def test_run_facts_and_guard_events_reach_the_run_summary() -> None:
    rig = Rig()
    rig.accept(tool(1))
    facts = decoded(TRACE, sid(20), STEP, run_id=TRACE.hex(), facts={"loopguard.termination_reason": "loop_guard"})
    guard = decoded(TRACE, sid(21), STEP, run_id=TRACE.hex(),
                    guards=[GuardEvent(time_ns=T0 + 20 * MS, kind="repeat", dispatched=False, tool="lookup")])
    assert rig.accept(facts, guard) == []
    assert rig.count("internal_errors_total") == 0
    a = attrs(summaries(rig.assembler.flush())[0])
    assert a["loopguard.score.termination_reason"] == "loop_guard"
    assert a["loopguard.score.guard_fired"] is True


def test_model_spans_count_turns_for_the_budget() -> None:
    rig = Rig(policy_from_mapping({"budget": {"max_turns": 2, "max_tool_calls": None, "max_seconds": None}}))
    rig.accept(tool(1))
    out: list[Span] = []
    for turn in (1, 2, 3):
        out += rig.accept(decoded(TRACE, sid(30 + turn), STEP, run_id=TRACE.hex(), model=ModelCall(turn=0)))
    assert ("budget", "stop") in finding_kinds(out)


def test_a_run_with_no_tool_call_completes_without_a_summary() -> None:
    rig = Rig()
    rig.accept(decoded(TRACE, sid(31), STEP, run_id=TRACE.hex(), model=ModelCall(turn=0)))
    assert rig.count("runs_open") == 1
    assert rig.assembler.flush() == []
    assert rig.count("runs_completed_total") == 1 and rig.count("runs_open") == 0


def test_runs_open_counts_each_open_run() -> None:
    rig = Rig()
    rig.accept(tool(1), tool(1, trace=TRACE_2))
    assert rig.count("runs_open") == 2
    rig.accept(root())
    rig.at(102.0)
    assert rig.count("runs_open") == 1 and list(rig.assembler.runs) == [TRACE_2.hex()]


# -- clock skew ---------------------------------------------------------------------------


def _skewed(rig: Rig) -> bool:
    return cast(bool, attrs(summaries(rig.assembler.flush())[0])["loopguard.run.clock_skew"])


@pytest.mark.parametrize("parent_first", [True, False])
@pytest.mark.parametrize(("start", "end", "skew"), [
    (T0 - 1, T0 + 5, True),  # starts before its parent
    (T0 + 5, T0 + 101, True),  # ends after it
    (T0, T0 + 100, False),  # exactly its parent's range
    (T0 + 10, T0 + 20, False),
])
def test_a_call_outside_its_parent_span_is_clock_skew_whichever_arrives_first(parent_first: bool, start: int, end: int,
                                                                              skew: bool) -> None:
    rig = Rig()
    parent = decoded(TRACE, STEP, ROOT, T0, T0 + 100)
    call = tool(1, start=start, end=end)
    if parent_first:
        rig.accept(parent, call)  # one request: the parent is kept because the request has calls
    else:
        rig.accept(call)
        rig.accept(parent)
    assert rig.count("clock_skew_total") == (1 if skew else 0)
    assert _skewed(rig) is skew


def test_a_parent_from_an_earlier_request_is_kept_once_the_trace_has_a_run() -> None:
    rig = Rig()
    rig.accept(tool(1, span=sid(1), parent=ROOT))
    rig.accept(decoded(TRACE, STEP, ROOT, T0, T0 + 100))
    rig.accept(tool(2, start=T0 + 200, end=T0 + 300))
    assert _skewed(rig) is True


def test_a_parent_still_open_bounds_only_the_start() -> None:
    rig = Rig()
    rig.accept(decoded(TRACE, STEP, ROOT, T0, 0), tool(1, start=T0 + 5, end=T0 + 10**12))
    assert _skewed(rig) is False
    rig = Rig()
    rig.accept(decoded(TRACE, STEP, ROOT, T0, 0), tool(1, start=T0 - 5, end=T0 + 5))
    assert _skewed(rig) is True


def test_siblings_waiting_for_their_parent_are_each_checked_up_to_the_bound() -> None:
    rig = Rig()
    n = assembly.MAX_CHILDREN_WAITING
    for i in range(1, n + 1):
        rig.accept(tool(i, span=sid(i), start=T0 + 1, end=T0 + 2))
    rig.accept(tool(n + 1, span=sid(n + 1), start=T0 - 1, end=T0 + 2))  # outside, but past the bound
    rig.accept(decoded(TRACE, STEP, ROOT, T0, T0 + 100))
    assert rig.count("clock_skew_total") == 0
    rig = Rig()
    rig.accept(tool(1, span=sid(1), start=T0 + 1, end=T0 + 2), tool(2, span=sid(2), start=T0 - 1, end=T0 + 2))
    rig.accept(decoded(TRACE, STEP, ROOT, T0, T0 + 100))
    assert rig.count("clock_skew_total") == 1


def test_calls_stop_waiting_for_their_parent_when_their_run_completes() -> None:
    """Otherwise the calls of runs whose parent never comes stay after their runs, outside
    every bound (tens of MiB after the overload flood, docs/reliability.md)."""
    rig = Rig()
    rig.accept(*(tool(i, start=T0 - 1, end=T0 + 2) for i in (1, 2)))  # both outside the parent to come
    rig.accept(tool(1, trace=TRACE_2, start=T0 - 1, end=T0 + 2))  # another run waits for its own parent
    assert summaries(rig.at(100.0 + IDLE))  # both runs complete idle, their parent never seen
    kept_for_late_calls = rig.assembler._late.side_entries  # noqa: SLF001 (test_late_revisions.py)
    assert rig.assembler.side_entries - kept_for_late_calls == 2 * 2  # per run: it and its trace; nothing waits
    rig.accept(decoded(TRACE, STEP, ROOT, T0, T0 + 100))  # the parent comes late: nothing to mark
    assert rig.count("clock_skew_total") == 0
    # negative control: while the run is open, the same calls are checked when the parent comes
    rig = Rig()
    rig.accept(*(tool(i, start=T0 - 1, end=T0 + 2) for i in (1, 2)))
    rig.accept(decoded(TRACE, STEP, ROOT, T0, T0 + 100))
    assert rig.count("clock_skew_total") == 2 and _skewed(rig) is True


def test_side_tables_forget_what_is_older_than_the_late_cache() -> None:
    """A burst's roots, completed traces and parent times go once no late span can use them,
    so its memory can go back (the estimate counts them as side entries); younger ones stay."""
    rig = Rig(late_cache_seconds=20.0)
    for n in range(50):
        trace = n.to_bytes(16, "big")
        rig.accept(decoded(trace, STEP, ROOT, T0, T0 + 100), tool(1, trace=trace, span=sid(1)), root(trace))
    assert summaries(rig.at(100.0 + GRACE))  # all 50 runs complete after their roots' grace
    full = rig.assembler.side_entries
    assert full >= 50 * 3  # a root, a completed trace and a parent's times per trace (at least)
    rig.clock.now = 110.0
    rig.accept(root(TRACE_2))  # one trace later
    rig.at(119.0)
    assert rig.assembler.side_entries >= full  # younger than the late cache: kept
    assert rig.accept(tool(2, trace=(7).to_bytes(16, "big"))) == [] and rig.count("late_spans_total") == 1
    rig.at(125.0)
    # what stays: where each run's numbering stopped (a conversation may resume) and TRACE_2's root
    assert rig.assembler.side_entries == 50 + 1


def test_a_call_without_a_parent_is_never_skewed() -> None:
    rig = Rig()
    rig.accept(tool(1, parent=b"", start=T0 - 50, end=T0 - 40))
    rig.accept(decoded(TRACE, sid(1) , b"", T0, T0 + 100))
    assert rig.count("clock_skew_total") == 0


# -- duplicates and conflicts ------------------------------------------------------------


def test_a_redelivered_call_is_one_info_finding_under_the_root() -> None:
    rig = Rig()
    rig.accept(root(), tool(1))
    again = tool(1, start=T0 + 7, end=T0 + 9)
    (span,) = rig.assembler.duplicate(again)
    a = attrs(span)
    assert (a["loopguard.finding.kind"], a["loopguard.finding.severity"]) == ("telemetry_duplicate", "info")
    assert (a["loopguard.finding.first_seq"], a["loopguard.finding.span_ids"]) == (1, [sid(1).hex()])
    assert a["loopguard.tool.name"] == "lookup"
    assert (span.trace_id, span.parent_span_id) == (TRACE, ROOT)
    assert (span.start_time_unix_nano, span.end_time_unix_nano) == (T0 + 7, T0 + 9)
    assert rig.count("findings_total", kind="telemetry_duplicate", tool="lookup") == 1


def test_a_conflicting_call_without_a_known_root_goes_under_its_own_parent() -> None:
    rig = Rig()
    rig.accept(tool(0, span=sid(1), dense=False))
    (span,) = rig.assembler.conflict(tool(0, span=sid(1), dense=False, name="other_tool"))
    a = attrs(span)
    assert (a["loopguard.finding.kind"], a["loopguard.finding.severity"]) == ("integrity_conflict", "warn")
    assert a["loopguard.finding.first_seq"] == 0  # no number of its own
    assert span.parent_span_id == STEP
    negative = tool(-3, span=sid(2), dense=False)
    (span,) = rig.assembler.duplicate(negative)
    assert attrs(span)["loopguard.finding.first_seq"] == 0


def test_a_dropped_span_of_no_open_run_or_no_call_is_not_reported() -> None:
    rig = Rig()
    assert rig.assembler.duplicate(tool(1)) == []  # no such run
    rig.accept(tool(1))
    assert rig.assembler.duplicate(decoded(TRACE, sid(1), STEP, run_id=TRACE.hex())) == []  # not a call
    assert rig.assembler.conflict(decoded(TRACE, sid(1), STEP)) == []  # no run id
    assert rig.count("findings_total", kind="telemetry_duplicate", tool="lookup") == 0


# -- metric labels ---------------------------------------------------------------------


def test_tool_labels_are_bounded_past_the_policys_tools() -> None:
    rig = Rig(policy_from_mapping({"tools": {"declared": {"max_calls": 50}}}))
    rig.accept(tool(1))
    names = [f"tool_{i}" for i in range(assembly.MAX_TOOL_LABELS)]
    for i, name in enumerate(names):
        rig.assembler.duplicate(tool(1, name=name, span=sid(100 + i)))
    assert rig.count("findings_total", kind="telemetry_duplicate", tool=names[-1]) == 1
    (past,) = rig.assembler.duplicate(tool(1, name="one_too_many", span=sid(300)))
    assert past.name == "loopguard.finding info telemetry_duplicate other"
    assert attrs(past)["loopguard.tool.name"] == "one_too_many"  # the attribute keeps the real name
    assert rig.count("findings_total", kind="telemetry_duplicate", tool="other") == 1
    # a tool labelled before, and a policy tool, keep their own label
    (known,) = rig.assembler.duplicate(tool(1, name="tool_0", span=sid(301)))
    (declared,) = rig.assembler.duplicate(tool(1, name="declared", span=sid(302)))
    assert (known.name, declared.name) == ("loopguard.finding info telemetry_duplicate tool_0",
                                           "loopguard.finding info telemetry_duplicate declared")
    assert rig.count("findings_total", kind="telemetry_duplicate", tool="declared") == 1


# -- errors in one span or run cost the others nothing --------------------------------------


def test_a_span_that_cannot_be_judged_costs_the_others_in_its_request_nothing() -> None:
    rig = Rig()
    repeat_run(rig, 2)
    broken = decoded(TRACE, sid(40), STEP, run_id=TRACE.hex(), call=cast(Any, "not a call"))
    out = rig.accept(broken, tool(3))
    assert finding_kinds(out) == [("repeat", "warn")]
    assert rig.count("internal_errors_total") == 1
    assert rig.count("buffered_calls") == 0


def test_a_run_that_cannot_advance_costs_the_other_runs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig()
    rig.accept(tool(1), tool(1, trace=TRACE_2))

    def broken(now: float, wait: float) -> list[Any]:
        raise RuntimeError("a bug")

    monkeypatch.setattr(rig.assembler.runs[TRACE.hex()], "expire_gap", broken)
    done = rig.at(130.0)
    assert [attrs(s)["loopguard.run.id"] for s in summaries(done)] == [TRACE_2.hex()]
    assert rig.count("internal_errors_total") == 1


def test_a_run_that_cannot_complete_is_still_summarised_as_an_integrity_error(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig()
    rig.accept(tool(1), tool(1, trace=TRACE_2))

    def broken() -> list[Any]:
        raise RuntimeError("a bug")

    monkeypatch.setattr(rig.assembler.runs[TRACE.hex()], "complete", broken)
    done = rig.assembler.flush()
    outcomes = {attrs(s)["loopguard.run.id"]: attrs(s)["loopguard.run.outcome"] for s in summaries(done)}
    assert outcomes == {TRACE.hex(): "integrity_error", TRACE_2.hex(): "scored"}
    assert rig.count("internal_errors_total") == 1 and rig.count("runs_completed_total") == 2
    # its trace is done with: its spans are late
    rig.accept(tool(2))
    assert rig.count("late_spans_total") == 1


# -- reloads --------------------------------------------------------------------------


def test_a_reloaded_policy_judges_runs_opened_after_it_and_open_runs_keep_theirs() -> None:
    rig = Rig(policy_from_mapping({"version": "old"}))
    rig.accept(tool(1))
    newer = Fingerprinter(KEY, policy_from_mapping({"version": "new"}))
    rig.assembler.use(newer)
    assert rig.assembler.fingerprinter is newer
    out = rig.accept(tool(2)) + rig.accept(tool(3)) + [s for seq in (1, 2, 3) for s in rig.accept(tool(seq, trace=TRACE_2))]
    versions = [attrs(s)["loopguard.policy.version"] for s in out]
    assert versions == ["old", "new"]


def test_a_conversation_keeps_the_roots_of_its_first_traces_only() -> None:
    """Bounded memory: a finding in a trace past the bound goes under its call's parent."""
    rig = Rig()
    n = assembly.MAX_ROOTS_PER_RUN
    traces = [(0x100 + i).to_bytes(16, "big") for i in range(n + 1)]
    for i, trace in enumerate(traces):
        rig.accept(tool(i + 1, trace=trace, run_id="conv-1", args={"q": i}), root(trace))
    last, kept = traces[-1], traces[-2]
    (past,) = rig.assembler.duplicate(tool(n + 1, trace=last, run_id="conv-1", args={"q": n}))
    (within,) = rig.assembler.duplicate(tool(n, trace=kept, run_id="conv-1", args={"q": n - 1}))
    assert (past.parent_span_id, within.parent_span_id) == (STEP, ROOT)


def test_runs_completing_in_one_tick_are_all_summarised() -> None:
    rig = Rig()
    rig.accept(tool(1), tool(1, trace=TRACE_2), tool(1, trace=bytes.fromhex("0c" * 16)))
    done = rig.at(130.0)
    assert len(summaries(done)) == 3 and rig.assembler.runs == {}


def test_nothing_of_a_completed_run_is_kept_but_its_late_cache_entry() -> None:
    rig = Rig()
    rig.accept(root(), tool(1), tool(1, trace=TRACE_2))
    rig.at(102.0)
    assert rig.assembler._trace_runs == {TRACE_2: {TRACE_2.hex()}}  # noqa: SLF001
    rig.assembler.flush()
    assert rig.assembler._trace_runs == {}  # noqa: SLF001


def test_a_run_sharing_a_trace_with_a_completed_one_is_still_kept_alive_by_that_trace() -> None:
    rig = Rig()
    rig.accept(tool(1, run_id="conv-a", span=sid(1)), tool(1, run_id="conv-b", span=sid(2)))
    rig.clock.now = 120.0
    rig.accept(tool(2, run_id="conv-b", span=sid(3), trace=TRACE_2))
    assert [attrs(s)["loopguard.run.id"] for s in summaries(rig.at(130.0))] == ["conv-a"]
    rig.clock.now = 145.0
    rig.accept(decoded(TRACE, sid(9), STEP))  # an ordinary span of the shared trace
    assert rig.at(150.0) == []  # conv-b: active at 145
    assert summaries(rig.at(175.0))


def test_calls_out_of_order_in_time_are_counted_as_clock_skew_at_completion() -> None:
    rig = Rig()
    # 2 and 3 each started well before 1: two events
    rig.accept(tool(1, start=T0 + 50 * MS), tool(2, start=T0 + 10 * MS), tool(3, start=T0 + 5 * MS))
    assert rig.count("clock_skew_total") == 0
    assert _skewed(rig) is True
    assert rig.count("clock_skew_total") == 2


def test_a_run_whose_calls_were_never_judged_is_summarised_at_the_top_of_its_trace() -> None:
    rig = Rig()
    (conflict,) = rig.accept(tool(200_000))  # far beyond any sequence seen: bad data, not judged
    assert attrs(conflict)["loopguard.finding.kind"] == "integrity_conflict"
    before = time.time_ns()
    (summary,) = summaries(rig.assembler.flush())
    assert attrs(summary)["loopguard.run.outcome"] == "integrity_error"
    assert (summary.trace_id, summary.parent_span_id) == (TRACE, b"")
    assert summary.start_time_unix_nano == summary.end_time_unix_nano >= before


def test_a_summary_of_calls_without_times_is_placed_at_completion_time() -> None:
    rig = Rig()
    for n in (1, 2):
        raw = RawCall(seq=0, tool="lookup", arguments={"q": n}, span_id=sid(n).hex(), trace_id=TRACE.hex(),
                      parent_id=STEP.hex())
        rig.accept(decoded(TRACE, sid(n), STEP, 0, 0, run_id=TRACE.hex(), call=raw))
    before = time.time_ns()
    (summary,) = summaries(rig.assembler.flush())
    assert summary.parent_span_id == STEP
    assert before <= summary.start_time_unix_nano == summary.end_time_unix_nano <= time.time_ns()


def test_what_happens_to_a_run_is_logged(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG, logger="otel_loopguard.receiver")
    rig = Rig()
    rig.accept(decoded(TRACE, STEP, ROOT, T0, T0 + 100), tool(1, start=T0 - 1, end=T0 + 5))
    rig.accept(tool(1, trace=TRACE_2), tool(1, trace=bytes.fromhex("0c" * 16)))

    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(rig.assembler.runs[TRACE_2.hex()], "expire_gap", broken)
    monkeypatch.setattr(rig.assembler.runs["0c" * 16], "complete", broken)
    rig.at(130.0)
    messages = caplog.messages
    assert f"clock skew in run {TRACE.hex()}: a tool call lies outside its parent span" in messages
    assert f"run {TRACE.hex()} complete: scored, 1 tool calls" in messages
    assert f"could not advance run {TRACE_2.hex()}" in messages
    assert f"could not complete run {'0c' * 16}" in messages
    assert f"run {'0c' * 16} complete: integrity_error, 1 tool calls" in messages
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == []  # no finding in these runs


def test_each_finding_is_logged_with_its_kind_tool_run_and_calls(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="otel_loopguard.receiver")
    rig = Rig()
    repeat_run(rig, 4)
    first, second = caplog.messages
    assert first.startswith(f"finding repeat/warn tool=lookup run={TRACE.hex()} seq=1-3: lookup was called 3 times")
    assert second.startswith(f"finding no_progress/warn tool=- run={TRACE.hex()} seq=2-4: 3 decisions in a row")


def test_a_parent_seen_before_its_trace_had_a_call_or_a_run_is_not_kept() -> None:
    """The negative control of the parent checks: only spans of traces with calls are kept
    (memory stays bounded by the traces that matter), so a skewed call under a parent that
    came alone, earlier, goes unnoticed."""
    rig = Rig()
    rig.accept(decoded(TRACE, STEP, ROOT, T0, T0 + 100))
    rig.accept(tool(1, start=T0 - 50, end=T0 + 5))
    assert rig.count("clock_skew_total") == 0 and _skewed(rig) is False


def test_every_span_of_a_request_is_judged_and_its_findings_returned() -> None:
    rig = Rig()
    repeat_run(rig, 2)
    out = rig.accept(tool(3), decoded(TRACE, sid(60), STEP))  # the finding comes from the first span
    assert finding_kinds(out) == [("repeat", "warn")]


def test_a_span_that_cannot_be_judged_is_logged_with_its_ids(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="otel_loopguard.receiver")
    rig = Rig()
    rig.accept(decoded(TRACE, sid(40), STEP, run_id=TRACE.hex(), call=cast(Any, "not a call")))
    assert caplog.messages == [f"could not judge span {sid(40).hex()} of trace {TRACE.hex()}"]


def test_model_spans_and_run_facts_keep_a_run_open_and_open_one() -> None:
    rig = Rig()
    rig.accept(tool(1))
    rig.clock.now = 120.0
    rig.accept(decoded(TRACE, sid(31), STEP, run_id=TRACE.hex(), model=ModelCall(turn=0)))
    assert rig.at(130.0) == [] and rig.assembler.runs
    assert summaries(rig.at(150.0))
    # a run opened by its facts alone completes when idle, like any other
    rig.accept(decoded(TRACE_2, sid(32), STEP, run_id=TRACE_2.hex(), facts={"loopguard.terminal_response": True}))
    assert list(rig.assembler.runs) == [TRACE_2.hex()]
    rig.at(180.0)
    assert rig.assembler.runs == {} and rig.count("internal_errors_total") == 0


def test_a_run_whose_first_numbered_call_never_arrives_is_incomplete() -> None:
    rig = Rig()
    assert rig.accept(tool(2)) == [] and rig.assembler.buffered_calls == 1
    (gap,) = rig.at(110.0)
    a = attrs(gap)
    assert (a["loopguard.finding.kind"], a["loopguard.finding.first_seq"]) == ("incomplete_trace", 1)


def test_with_dense_seq_every_numbered_call_is_judged_as_it_arrives() -> None:
    rig = Rig(dense_seq=True)
    per_call = [finding_kinds(rig.accept(tool(seq, dense=False))) for seq in (1, 2, 3)]
    assert per_call == [[], [], [("repeat", "warn")]]
    plain = Rig()  # the negative control: unmarked numbers are held until completion
    assert [finding_kinds(plain.accept(tool(seq, dense=False))) for seq in (1, 2, 3)] == [[], [], []]
    assert finding_kinds(plain.assembler.flush()) == [("repeat", "warn")]


def test_a_finding_about_calls_without_times_is_placed_when_it_is_made() -> None:
    rig = Rig()
    for n in (1, 2, 3):
        raw = RawCall(seq=0, tool="lookup", arguments={"q": 1}, span_id=sid(n).hex(), trace_id=TRACE.hex(),
                      parent_id=STEP.hex())
        rig.accept(decoded(TRACE, sid(n), STEP, 0, 0, run_id=TRACE.hex(), call=raw))
    before = time.time_ns()
    (warn,) = [s for s in rig.assembler.flush() if "loopguard.finding.kind" in attrs(s)]
    assert warn.parent_span_id == STEP
    assert before <= warn.start_time_unix_nano == warn.end_time_unix_nano <= time.time_ns()
