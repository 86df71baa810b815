"""Arrival orders real deployments produce; one bad run must never cost the others."""

from __future__ import annotations

import json
import time


from .agent import provider
from .harness import (
    RUN,
    ReceiverThread,
    Sink,
    TaggedRun,
    attr,
    export_stub,
    make_config,
    make_span,
    request_of,
    wait_for,
)

def _untagged_call(run: TaggedRun, span_id: bytes, at_seconds: int):
    """A tool span of the same run without the processor's tags (e.g. a remote tool server's span)."""
    return make_span(run.trace_id, span_id, "execute_tool lookup_order", parent=run.root_id,
                     start=run.t0 + at_seconds * 1_000_000_000, end=run.t0 + at_seconds * 1_000_000_000 + 100_000_000,
                     attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                                 "gen_ai.tool.call.arguments": "{}", "loopguard.run.id": run.run_id})


def test_parallel_tool_calls_finishing_out_of_order_are_judged(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=0.3))
    try:
        tp = provider(receiver.port, batch=True)
        tracer = tp.get_tracer("parallel-agent")
        with tracer.start_as_current_span("invoke_agent support"):
            for turn in range(1, 4):
                with tracer.start_as_current_span("chat scripted") as chat:
                    chat.set_attribute("gen_ai.operation.name", "chat")
                a = tracer.start_span("execute_tool lookup_order")
                b = tracer.start_span("execute_tool lookup_stock")
                for span, tool, arg in ((a, "lookup_order", {"order_id": f"A{turn}"}), (b, "lookup_stock", {"sku": f"S{turn}"})):
                    span.set_attribute("gen_ai.operation.name", "execute_tool")
                    span.set_attribute("gen_ai.tool.name", tool)
                    span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arg))
                    span.set_attribute("gen_ai.tool.call.result", json.dumps({"ok": True, **arg}))
                time.sleep(0.002)
                b.end()  # the later-started call finishes first: exported first
                a.end()
        tp.shutdown()
        summary = wait_for(lambda: sink.runs(), timeout=2.0, what="run summary")[0]
        assert attr(summary, "loopguard.score.tool_calls") == 6
        assert attr(summary, "loopguard.run.outcome") == "scored"
    finally:
        receiver.stop()


def test_a_run_mixing_tagged_and_untagged_tool_spans_still_completes(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port))
    try:
        run = TaggedRun(seed=31)  # run id = trace id, so the untagged span joins the same run
        channel, stub = export_stub(receiver.port)
        stub.Export(request_of([run.call(s) for s in (1, 2, 3)]), timeout=10)
        remote = _untagged_call(run, b"\x44" * 8, 5)
        stub.Export(request_of([remote, run.root()]), timeout=10)
        channel.close()
        summary = wait_for(lambda: sink.runs(), timeout=2.0, what="run summary")[0]
        assert attr(summary, "loopguard.run.id") == run.run_id
        assert attr(summary, "loopguard.run.outcome") == "integrity_error"
    finally:
        receiver.stop()


def test_shutdown_delivers_every_open_run_including_a_mixed_one(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=60.0, root_grace_seconds=60.0))
    channel, stub = export_stub(receiver.port)
    healthy = TaggedRun(seed=37, run_id="healthy-open-run")
    stub.Export(request_of([healthy.call(s, args=f"{s:032x}", result=f"{s + 100:032x}") for s in (1, 2, 3)]), timeout=10)
    mixed = TaggedRun(seed=41, run_id="mixed-open-run")
    stub.Export(request_of([mixed.call(s) for s in (1, 2, 3)]), timeout=10)
    stub.Export(request_of([_untagged_call(mixed, b"\x45" * 8, 5)]), timeout=10)
    channel.close()
    error = None
    try:
        receiver.stop()
    except Exception as exc:  # noqa: BLE001 - the assertion below reports it
        error = exc
    summaries = sorted(attr(s, "loopguard.run.id") for s in sink.runs())
    assert error is None, f"stop raised {error!r}"
    assert summaries == ["healthy-open-run", "mixed-open-run"]


def test_a_call_arriving_after_its_gap_expired_is_not_an_integrity_conflict(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, gap_wait_seconds=0.5, idle_timeout_seconds=30.0))
    try:
        run = TaggedRun(seed=43)
        channel, stub = export_stub(receiver.port)
        stub.Export(request_of([run.call(s) for s in (1, 2, 4, 5, 6)]), timeout=10)
        wait_for(lambda: [f for f in sink.findings()
                          if attr(f, "loopguard.finding.kind") == "incomplete_trace"], what="incomplete_trace")
        stub.Export(request_of([run.call(3)]), timeout=10)  # the straggler: the only span ever claiming seq 3
        stub.Export(request_of([run.root()]), timeout=10)
        channel.close()
        summary = wait_for(lambda: sink.runs(), what="run summary")[0]
        kinds = [attr(f, "loopguard.finding.kind") for f in sink.findings()]
        assert "integrity_conflict" not in kinds
        assert attr(summary, "loopguard.run.outcome") == "incomplete_trace"
    finally:
        receiver.stop()


def test_a_run_spanning_two_traces_is_judged_as_one_run(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=0.3, idle_timeout_seconds=30.0))
    try:
        first = TaggedRun(run_id="conversation-7", seed=47)
        second = TaggedRun(run_id="conversation-7", seed=53)  # the next user turn: a new trace, same run
        channel, stub = export_stub(receiver.port)
        stub.Export(request_of([first.call(s) for s in (1, 2, 3)] + [first.root()]), timeout=10)
        time.sleep(0.8)  # the user takes a moment to answer
        stub.Export(request_of([second.call(s) for s in (4, 5, 6)] + [second.root()]), timeout=10)
        channel.close()
        stop = wait_for(lambda: [f for f in sink.findings()
                                 if attr(f, "loopguard.finding.severity") == "stop"], timeout=3.0, what="stop finding")
        assert attr(stop[0], "loopguard.finding.kind") == "repeat"
        assert receiver.running.metrics.get("late_spans_total") == 0
    finally:
        receiver.stop()
