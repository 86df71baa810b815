"""A run whose LAST tool calls were lost on the way (issue 27): no hole in the numbers says so,
but its root span does: the processor writes `loopguard.run.calls` on it (processor/root.py).
The receiver compares when it judges the run: fewer calls than counted -> `incomplete_trace`
and `loopguard.run.calls_missing`; late calls that complete it revise the summary unmarked.
Controls: the count met, no count, a count on a span that is not the root."""

from __future__ import annotations

import pytest

from otel_loopguard.receiver.ingest.decoder import decode
from otel_loopguard.receiver.ingest.decode import decode_python
from otel_loopguard.receiver.runs import assembly

from receiver.harness import make_span, request_of

from .test_run_assembler import GRACE, ROOT, T0, TRACE, Rig, attrs, decoded, finding_kinds, summaries, tool

CALLS = "loopguard.run.calls"


def _root(counted: object, parent: bytes = b"") -> object:
    """The root span as decode() reads it when it carries the processor's count."""
    return decoded(TRACE, ROOT, parent, T0, T0 + 10_000_000_000, run_id=TRACE.hex(), facts={CALLS: counted})


def _judge(rig: Rig, seqs: range, counted: object, parent: bytes = b"") -> list:
    rig.clock.now = 100.0
    for seq in seqs:  # each call a different lookup: a passing run when whole
        rig.accept(tool(seq, args={"q": seq}, result={"rows": [seq]}))
    rig.accept(_root(counted, parent))
    if parent:
        rig.accept(decoded(TRACE, bytes.fromhex("09" * 8), b"", T0, T0 + 1))  # the real root, without a count
    return rig.at(100.0 + GRACE)


def test_calls_missing_at_the_end_mark_the_run() -> None:
    out = _judge(Rig(), range(1, 4), 5)
    assert finding_kinds(out) == [("incomplete_trace", "warn")]
    (summary,) = summaries(out)
    a = attrs(summary)
    assert a["loopguard.run.outcome"] == "incomplete_trace" and a["loopguard.score.scorable"] is False
    assert a["loopguard.run.calls_missing"] == 2
    (finding,) = [s for s in out if "loopguard.finding.kind" in attrs(s)]
    assert "says the app numbered 5 tool calls, and the last 2 never arrived" in attrs(finding)["loopguard.finding.reason"]


def test_control_the_count_met_is_scored_unmarked() -> None:
    out = _judge(Rig(), range(1, 6), 5)
    assert finding_kinds(out) == []
    (summary,) = summaries(out)
    assert attrs(summary)["loopguard.run.outcome"] == "scored"
    assert "loopguard.run.calls_missing" not in attrs(summary)


@pytest.mark.parametrize("counted", [None, True, "5", 0, -1], ids=["none", "bool", "text", "zero", "negative"])
def test_control_no_usable_count_marks_nothing(counted: object) -> None:
    out = _judge(Rig(), range(1, 4), counted)
    assert finding_kinds(out) == [] and attrs(summaries(out)[0])["loopguard.run.outcome"] == "scored"


def test_control_a_count_on_a_span_that_is_not_the_root_is_not_the_runs() -> None:
    out = _judge(Rig(), range(1, 4), 5, parent=bytes.fromhex("08" * 8))
    assert finding_kinds(out) == [] and attrs(summaries(out)[0])["loopguard.run.outcome"] == "scored"


def test_mutation_without_the_comparison_the_missing_calls_pass_unmarked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assembly.RunAssembler, "_calls_missing", lambda self, buffer: (0, []))
    out = _judge(Rig(), range(1, 4), 5)
    assert finding_kinds(out) == [] and attrs(summaries(out)[0])["loopguard.run.outcome"] == "scored"


def test_late_calls_that_complete_the_count_revise_the_summary_unmarked() -> None:
    rig = Rig()
    (first,) = summaries(_judge(rig, range(1, 4), 5))
    assert attrs(first)["loopguard.run.calls_missing"] == 2
    rig.clock.now = 103.0
    rig.accept(tool(4, args={"q": 4}, result={"rows": [4]}))
    (partly,) = summaries(rig.at(103.0 + GRACE))
    assert attrs(partly)["loopguard.run.calls_missing"] == 1  # still one short: still marked
    assert attrs(partly)["loopguard.run.outcome"] == "incomplete_trace"
    rig.clock.now = 110.0
    rig.accept(tool(5, args={"q": 5}, result={"rows": [5]}))
    (whole,) = summaries(rig.at(110.0 + GRACE))
    assert attrs(whole)["loopguard.run.outcome"] == "scored" and "loopguard.run.calls_missing" not in attrs(whole)
    assert attrs(whole)["loopguard.run.revises"] == first.span_id.hex()


def test_both_decoders_read_the_count_on_a_root_span() -> None:
    """decode() (the native decoder when built) and the Python reference alike."""
    span = make_span(TRACE, ROOT, "invoke_agent support", start=T0, end=T0 + 1, attributes={CALLS: 7})
    data = request_of([span]).SerializeToString()
    for decoded_request in (decode(data), decode_python(data)):
        (d,) = decoded_request.spans
        assert d.facts == {CALLS: 7} and d.run_id == TRACE.hex() and d.call is None


def test_both_decoders_read_the_count_on_an_agent_root() -> None:
    """An `invoke_agent` root is read as an agent span, and its count as a run fact."""
    marked = {CALLS: 4, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    span = make_span(TRACE, ROOT, "invoke_agent support", start=T0, end=T0 + 1, attributes=marked)
    data = request_of([span]).SerializeToString()
    for decoded_request in (decode(data), decode_python(data)):
        (d,) = decoded_request.spans
        assert d.facts == {CALLS: 4} and d.run_id == TRACE.hex() and d.agent == "support"
