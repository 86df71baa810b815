"""The receiver's folding of finding spans (receiver/out/folding.py), in process on spans built as
the receiver builds them: what leaves together is folded, what left before is named, and the
waste counters count each loop once. Negative controls: separate loops and tools stay apart."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_loopguard.calls import ToolCall
from otel_loopguard.findings import Finding
from otel_loopguard.findings.otlp import place_at, run_span
from otel_loopguard.findings.otlp import finding_span as build
from otel_loopguard.otlp.values import attributes
from otel_loopguard.receiver.ops.metrics import Metrics
from otel_loopguard.receiver.out.folding import Folder

WHERE = place_at(b"\x0a" * 16, b"\x01" * 8, 1_000, 9_000)
CALLS = [ToolCall(seq=s, tool="lookup_order", action="d1", result="r", ok=True, span_id=f"{s:016x}",
                  start_ns=s * 1_000, end_ns=s * 1_000 + 500) for s in range(1, 12)]


def span(kind: str, severity: str, seqs: tuple[int, ...], waste_calls: int = 0, **over: Any) -> Span:
    fields: dict[str, Any] = dict(kind=kind, severity=severity, first_seq=seqs[0], last_seq=seqs[-1], count=len(seqs),
                                  seqs=seqs, span_ids=tuple(f"{s:016x}" for s in seqs), reason=f"{kind} {severity}",
                                  tool="lookup_order", action="d1", run_id="run-1")
    fields.update(over)
    extra = {"loopguard.finding.waste.calls": waste_calls, "loopguard.finding.waste.seconds": waste_calls * 0.5,
             "loopguard.finding.waste.tokens": waste_calls * 100} if waste_calls else None
    return build(Finding(**fields), CALLS, WHERE, extra=extra)


def a(s: Span) -> dict[str, Any]:
    return attributes(s.attributes)


def kinds(spans: list[Span]) -> list[tuple[str, str]]:
    return [(a(s)["loopguard.finding.kind"], a(s)["loopguard.finding.severity"]) for s in spans]


def test_a_warn_and_its_stop_leaving_together_leave_as_the_stop_saying_when_the_warn_came() -> None:
    folder = Folder(Metrics())
    out = folder.fold([span("repeat", "warn", (1, 2, 3), 3), span("repeat", "stop", (1, 2, 3, 4, 5), 5)])
    assert kinds(out) == [("repeat", "stop")]
    assert a(out[0])["loopguard.finding.warned_at_seq"] == 3
    assert "loopguard.finding.warn_span_id" not in a(out[0])


def test_a_no_progress_over_the_same_calls_rides_on_the_repeat_with_its_attributes_unchanged() -> None:
    rider = span("no_progress", "stop", (2, 3, 4), tool=None, action=None)
    before = a(rider)
    out = Folder(Metrics()).fold([rider, span("repeat", "stop", (1, 2, 3, 4, 5))])
    assert kinds(out) == [("repeat", "stop")]
    (event,) = [e for e in out[0].events if e.name == "loopguard.finding"]
    assert attributes(event.attributes) == {k: v for k, v in before.items() if k.startswith("loopguard.")}
    assert a(out[0])["loopguard.finding.episode_kinds"] == ["no_progress", "repeat"]


def test_live_a_stop_after_its_warn_left_names_the_warn_and_the_waste_counts_the_loop_once() -> None:
    metrics = Metrics()
    folder = Folder(metrics)
    (warn,) = folder.fold([span("repeat", "warn", (1, 2, 3), 3)])
    (stop,) = folder.fold([span("repeat", "stop", (1, 2, 3, 4, 5), 5)])
    assert a(stop)["loopguard.finding.warn_span_id"] == warn.span_id.hex()
    assert a(stop)["loopguard.finding.warned_at_seq"] == 3
    assert metrics.get("loop_wasted_calls_total", tool="lookup_order", kind="repeat") == 5  # 3, then 2 more
    assert metrics.get("loop_wasted_tokens_total", tool="lookup_order", kind="repeat") == 500
    # A later finding of the same episode names its first span, and adds no waste it does not add.
    (late,) = folder.fold([span("no_progress", "stop", (3, 4, 5), 3, tool=None, action=None)])
    assert a(late)["loopguard.finding.episode_span_id"] == warn.span_id.hex()
    assert metrics.get("loop_wasted_calls_total") == 5


def test_negative_two_separate_loops_and_two_tools_stay_apart_and_both_count() -> None:
    metrics = Metrics()
    folder = Folder(metrics)
    out = folder.fold([span("repeat", "stop", (1, 2, 3), 3), span("repeat", "stop", (7, 8, 9), 3),
                       span("repeat", "stop", (4, 5, 6), 3, tool="search", action="d2")])
    assert len(out) == 3 and all("loopguard.finding.warned_at_seq" not in a(s) for s in out)
    assert metrics.get("loop_wasted_calls_total", tool="lookup_order", kind="repeat") == 6
    assert metrics.get("loop_wasted_calls_total", tool="search", kind="repeat") == 3
    (later,) = folder.fold([span("repeat", "stop", (10, 11), 2)])  # after both: a third loop
    assert "loopguard.finding.episode_span_id" not in a(later)


def test_run_summaries_and_integrity_findings_pass_untouched() -> None:
    summary = run_span("run-1", WHERE, {"scorable": False}, {})
    gap = span("incomplete_trace", "warn", (3,))
    out = Folder(Metrics()).fold([summary, gap, span("repeat", "stop", (1, 2, 3))])
    assert out[0] is summary and out[1] is gap and len(out) == 3
