"""Findings-only mode, a healthy agent (negative control), and graceful shutdown."""

from __future__ import annotations

import pytest

from .agent import HEALTHY, LOOP, encode, provider, record_spans, run_agent
from .harness import (
    FINDING,
    RUN,
    ReceiverThread,
    Sink,
    TaggedRun,
    app_spans,
    attr,
    export_stub,
    findings_of,
    make_config,
    request_of,
    wait_for,
)

LOOP_KINDS = ("repeat", "cycle", "no_progress", "error_streak", "budget", "tool_cap", "poll_budget",
              "duplicate_write", "parallel_duplicate")


def test_findings_only_mode_sends_findings_and_summary_but_no_app_spans(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, findings_only=True))
    try:
        tp = provider(receiver.port)
        trace_id = run_agent(tp, LOOP)
        tp.shutdown()
        summary = wait_for(lambda: sink.runs(), what="run summary")[0]
        assert app_spans(sink) == []
        assert {s.name.split(" ", 1)[0] for s in sink.spans()} == {FINDING, RUN}
        stop = [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "stop"]
        assert len(stop) == 1 and stop[0].trace_id.hex() == trace_id
        assert stop[0].name == "loopguard.finding stop repeat lookup_order"
        assert attr(summary, "loopguard.run.outcome") == "scored"
        assert receiver.running.metrics.get("spans_forwarded_total") == 0
        assert receiver.running.metrics.get("spans_received_total") == 13
    finally:
        receiver.stop()


def test_findings_only_mode_still_dedupes(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, findings_only=True))
    try:
        _, spans = record_spans(LOOP)
        channel, stub = export_stub(receiver.port)
        stub.Export(encode(spans), timeout=10)
        stub.Export(encode(spans), timeout=10)
        channel.close()
        summary = wait_for(lambda: sink.runs(), what="run summary")[0]
        assert attr(summary, "loopguard.score.tool_calls") == 6
        assert receiver.running.metrics.get("duplicates_total") == 13
        assert app_spans(sink) == []
    finally:
        receiver.stop()


def test_a_healthy_agent_gets_no_loop_findings_and_passes(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port))
    try:
        tp = provider(receiver.port)
        run_agent(tp, HEALTHY)
        tp.shutdown()
        summary = wait_for(lambda: sink.runs(), what="run summary")[0]
        assert [attr(f, "loopguard.finding.kind") for f in sink.findings()] == []
        assert attr(summary, "loopguard.run.outcome") == "scored"
        assert attr(summary, "loopguard.score.release.passed") is True
        assert attr(summary, "loopguard.score.repeat_threshold_crossed") is False
        assert attr(summary, "loopguard.score.tool_calls") == 6
        assert attr(summary, "loopguard.score.distinct_action_count") == 6
        assert len(app_spans(sink)) == 13
    finally:
        receiver.stop()


@pytest.mark.parametrize("tagged", [False, True], ids=["sdk-spans", "processor-tagged"])
def test_graceful_shutdown_judges_open_runs_as_cut_and_delivers_their_findings(sink: Sink, tagged: bool) -> None:
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=60.0, root_grace_seconds=60.0))
    stopped = False
    try:
        channel, stub = export_stub(receiver.port)
        if tagged:
            run = TaggedRun(seed=23)
            stub.Export(request_of([run.call(s) for s in range(1, 7)]), timeout=10)
            run_id = run.run_id
        else:
            run_id, spans = record_spans(LOOP)
            without_root = [s for s in spans if s.parent is not None]
            assert len(without_root) == 12
            stub.Export(encode(without_root), timeout=10)
        channel.close()
        assert receiver.sync(lambda: run_id in receiver.running.assembler.runs)
        receiver.stop()
        stopped = True
        summaries = sink.runs()
        assert len(summaries) == 1
        assert attr(summaries[0], "loopguard.run.id") == run_id
        # Its root never ended: the shutdown cut it, so it is judged (the loop is reported) but
        # not scored as if whole (receiver/runs/restart.py, rule 1; tests/reliability/ has the restarts).
        assert attr(summaries[0], "loopguard.run.outcome") == "incomplete_trace"
        cut = findings_of(sink, kind="incomplete_trace")
        assert len(cut) == 1 and "receiver stopped" in attr(cut[0], "loopguard.finding.reason")
        stop = [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "stop"]
        assert len(stop) == 1
        assert attr(stop[0], "loopguard.finding.count") == 5
    finally:
        if not stopped:
            receiver.stop()
