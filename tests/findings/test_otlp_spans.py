"""Finding and run summary spans as built (findings/otlp.py), in process: every attribute,
link, event, status and placement a backend shows, and the exact values a consumer reads.

The receiver's tests check these spans after a real gRPC round trip; these pin the builders
down field by field, so that mutation testing (docs/testing.md), whose forked workers do not
survive a gRPC server, can tell a wrong field from a right one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from otel_loopguard import __version__
from otel_loopguard.calls import ToolCall
from otel_loopguard.findings import Finding
from otel_loopguard.findings.otlp import (
    MAX_INPUT_CHARS,
    Placement,
    export_request,
    finding_name,
    finding_span,
    is_own_span,
    place,
    place_at,
    run_name,
    run_span,
)
from otel_loopguard.otlp.values import attributes

TRACE = "0a" * 16
OTHER_TRACE = "0b" * 16
ROOT = "01" * 8
# A stop's reason ends with what enforce mode would have done (issue 29, findings/wording.py):
# the repeat's call 5 is the one it would deny.
STOP_REASON = "same call 3 times; enforce mode would deny call 5: see docs/guard.md"
WHERE = Placement(bytes.fromhex(TRACE), bytes.fromhex(ROOT), 1_000, 9_000)


def call(seq: int, trace: str | None = TRACE, parent: str | None = "02" * 8, start: int | None = None,
         end: int | None = None) -> ToolCall:
    return ToolCall(seq=seq, tool="lookup", action="a", result="r", ok=True, span_id=f"{seq:016x}",
                    start_ns=start, end_ns=end, trace_id=trace, parent_id=parent)


def finding(**over: Any) -> Finding:
    fields: dict[str, Any] = dict(kind="repeat", severity="stop", first_seq=3, last_seq=5, count=3, seqs=(3, 4, 5),
                                  span_ids=(f"{3:016x}", None, f"{5:016x}"), reason="same call 3 times",
                                  tool="lookup", action="d" * 16, run_id="run-1", policy_version="v7")
    fields.update(over)
    return Finding(**fields)


def attrs(item: Any) -> dict[str, Any]:
    return attributes(item.attributes)


# -- placement -----------------------------------------------------------------------


def test_no_call_with_a_trace_has_no_placement() -> None:
    assert place([], {}, 5) is None
    assert place([call(1, trace=None), call(2, trace="")], {TRACE: ROOT}, 5) is None


def test_a_finding_goes_under_the_root_of_the_last_calls_trace_spanning_that_traces_calls() -> None:
    calls = [call(1, OTHER_TRACE, start=10, end=20), call(2, start=300, end=400), call(3, start=200, end=350),
             call(4, OTHER_TRACE, start=5, end=9_999), call(5, start=None, end=None), call(6, start=250, end=380)]
    where = place(calls, {TRACE: ROOT, OTHER_TRACE: "03" * 8}, now_ns=77)
    # the trace of the last call: calls of the other trace neither place nor time it
    assert where == Placement(bytes.fromhex(TRACE), bytes.fromhex(ROOT), 200, 400)
    # the same calls, the other trace last
    assert place(calls[:4], {TRACE: ROOT, OTHER_TRACE: "03" * 8}, 77) == Placement(
        bytes.fromhex(OTHER_TRACE), bytes.fromhex("03" * 8), 5, 9_999)


def test_without_a_known_root_a_finding_goes_under_the_first_call_parent_of_its_trace() -> None:
    calls = [call(1, OTHER_TRACE, parent="04" * 8), call(2, parent="05" * 8), call(3, parent="06" * 8)]
    where = place(calls, {OTHER_TRACE: ROOT}, now_ns=50)
    assert where == Placement(bytes.fromhex(TRACE), bytes.fromhex("05" * 8), 50, 50)  # no times: now
    assert place([call(1, parent=None)], {}, 50) == Placement(bytes.fromhex(TRACE), b"", 50, 50)


def test_a_placement_never_ends_before_it_starts() -> None:
    # only an end time known, before now: the span starts now and ends now
    assert place([call(1, start=None, end=40)], {}, now_ns=100) == Placement(bytes.fromhex(TRACE), bytes.fromhex("02" * 8), 100, 100)
    assert place([call(1, start=60, end=None)], {}, now_ns=10) == Placement(bytes.fromhex(TRACE), bytes.fromhex("02" * 8), 60, 60)
    assert place_at(b"t", b"p", 30, 20) == Placement(b"t", b"p", 30, 30)
    assert place_at(b"t", b"p", 20, 30) == Placement(b"t", b"p", 20, 30)


# -- finding spans -------------------------------------------------------------------


def test_a_finding_span_carries_every_finding_field_by_its_documented_name() -> None:
    span = finding_span(finding(), [], WHERE)
    assert attrs(span) == {
        "loopguard.finding.kind": "repeat",
        "loopguard.finding.severity": "stop",
        "loopguard.finding.first_seq": 3,
        "loopguard.finding.last_seq": 5,
        "loopguard.finding.count": 3,
        "loopguard.finding.span_ids": [f"{3:016x}", f"{5:016x}"],  # a call without a span id is left out
        "loopguard.finding.reason": STOP_REASON,
        "loopguard.run.id": "run-1",
        "loopguard.policy.version": "v7",
        "loopguard.tool.name": "lookup",
        "loopguard.args.digest": "d" * 16,
        "openinference.span.kind": "GUARDRAIL",
        "input.value": json.dumps({"tool": "lookup", "calls": "3-5"}),
        "input.mime_type": "application/json",
        "output.value": STOP_REASON,
        "output.mime_type": "text/plain",
    }
    assert span.name == "loopguard.finding stop repeat lookup"
    assert (span.trace_id, span.parent_span_id) == (WHERE.trace_id, WHERE.parent_id)
    assert (span.start_time_unix_nano, span.end_time_unix_nano) == (1_000, 9_000)
    assert span.kind == Span.SPAN_KIND_INTERNAL
    assert len(span.span_id) == 8 and span.span_id != bytes(8)
    assert finding_span(finding(), [], WHERE).span_id != span.span_id  # each span its own id
    assert len(UnknownFieldSet(span)) == 0  # nothing but fields of a Span was written


def test_a_finding_without_tool_or_action_has_neither_attribute_nor_a_tool_in_its_name() -> None:
    span = finding_span(finding(kind="incomplete_trace", severity="warn", tool=None, action=None, first_seq=4,
                                last_seq=4, count=1, seqs=(4,), span_ids=(None,)), [], WHERE)
    a = attrs(span)
    assert "loopguard.tool.name" not in a and "loopguard.args.digest" not in a
    assert a["loopguard.finding.span_ids"] == []
    assert a["input.value"] == json.dumps({"calls": "4"})  # one call: its number, not a range
    assert span.name == "loopguard.finding warn incomplete_trace"
    assert not span.links and [e.name for e in span.events] == ["gen_ai.evaluation.result"]


def test_the_name_takes_the_bounded_tool_label_when_given() -> None:
    f = finding()
    assert finding_name(f) == "loopguard.finding stop repeat lookup"
    assert finding_name(f, "other") == "loopguard.finding stop repeat other"
    assert finding_name(f, "") == "loopguard.finding stop repeat"
    assert finding_span(f, [], WHERE, tool_label="other").name == "loopguard.finding stop repeat other"
    assert attrs(finding_span(f, [], WHERE, tool_label="other"))["loopguard.tool.name"] == "lookup"


def test_links_and_call_events_name_each_offending_span_in_its_own_trace_and_time() -> None:
    calls = [call(3, OTHER_TRACE, start=1_500), call(5, trace=None, start=None)]
    f = finding(seqs=(3, 4, 5, 6), span_ids=(f"{3:016x}", None, f"{5:016x}", f"{6:016x}"), first_seq=3,
                last_seq=6, count=4)
    span = finding_span(f, calls, WHERE)
    assert [(link.trace_id.hex(), link.span_id.hex()) for link in span.links] == [
        (OTHER_TRACE, f"{3:016x}"),  # the call's own trace
        (TRACE, f"{5:016x}"),  # a call without a trace id: the finding's trace
        (TRACE, f"{6:016x}"),  # a call not given: the finding's trace
    ]
    events = [(e.name, e.time_unix_nano, attrs(e)) for e in span.events]
    assert events == [
        # First and at the span's start, the reason its first field: the log Jaeger shows first.
        ("gen_ai.evaluation.result", 1_000, {
            "gen_ai.evaluation.explanation": STOP_REASON.replace("call 5", "call 6"),  # its last call
            "gen_ai.evaluation.name": "loopguard.repeat",
            "gen_ai.evaluation.score.label": "stop",
        }),
        ("loopguard.call", 1_500, {"loopguard.seq": 3, "span_id": f"{3:016x}"}),
        ("loopguard.call", 1_000, {"loopguard.seq": 5, "span_id": f"{5:016x}"}),  # no start: the span's
        ("loopguard.call", 1_000, {"loopguard.seq": 6, "span_id": f"{6:016x}"}),
    ]
    assert [kv.key for kv in span.events[0].attributes][0] == "gen_ai.evaluation.explanation"


@pytest.mark.parametrize("severity", ["stop", "warn", "info"])
def test_only_a_stop_sets_status_error_with_the_reason(severity: str) -> None:
    span = finding_span(finding(severity=severity), [], WHERE)
    if severity == "stop":
        assert (span.status.code, span.status.message) == (Status.STATUS_CODE_ERROR, STOP_REASON)
    else:
        assert span.status == Status()


def test_the_raw_arguments_are_shown_as_judged_cut_short_past_the_limit() -> None:
    def shown(arguments: str) -> Any:
        return json.loads(attrs(finding_span(finding(), [], WHERE, arguments=arguments))["input.value"])

    assert shown('{"q": "zürich"}') == {"tool": "lookup", "calls": "3-5", "arguments": '{"q": "zürich"}'}
    assert "zürich" in attrs(finding_span(finding(), [], WHERE, arguments="zürich"))["input.value"]  # not escaped
    exact = "x" * MAX_INPUT_CHARS
    assert shown(exact)["arguments"] == exact
    assert shown(exact + "yz")["arguments"] == exact + "..."
    assert json.loads(attrs(finding_span(finding(), [], WHERE))["input.value"]) == {"tool": "lookup", "calls": "3-5"}
    assert json.loads(attrs(finding_span(finding(), [], WHERE, arguments=""))["input.value"])["arguments"] == ""


@pytest.mark.parametrize(("name", "own"), [
    ("loopguard.finding", True), ("loopguard.run", True), ("loopguard.finding repeat/stop lookup", True),
    ("loopguard.run scored/pass", True), ("loopguard.findings", False), ("loopguard.runner x", False),
    ("loopguard.call", False), ("my loopguard.finding", False), ("lookup", False),
    ("loopguard.finding\trepeat/stop", False),  # detail follows one space, as we write it
])
def test_own_spans_are_known_by_name_bare_or_with_detail(name: str, own: bool) -> None:
    assert is_own_span(name) is own


# -- run summaries -------------------------------------------------------------------

PASSED = {"passed": True, "violations": []}
FAILED = {"passed": False, "violations": ["uncontained_loop: repeat at 5", "budget: 40 calls"]}


def test_run_names_say_the_outcome_and_the_release_verdict() -> None:
    assert run_name("scored", {"release": PASSED}) == "loopguard.run scored/pass"
    assert run_name("scored", {"release": FAILED}) == "loopguard.run scored/fail"
    assert run_name("scored", {"release": None}) == "loopguard.run scored"
    assert run_name("scored", {}) == "loopguard.run scored"
    assert run_name("incomplete_trace", {"release": PASSED}) == "loopguard.run incomplete_trace"


def test_a_failing_run_span_carries_every_score_field_and_status_error_with_the_broken_rules() -> None:
    score = {"scorable": True, "tool_calls": 7, "release": FAILED, "findings_by_kind": {"repeat": 2, "budget": 1},
             "termination_reason": None, "loop_rate": 0.5}
    span = run_span("run-1", WHERE, score, {"loopguard.run.outcome": "scored", "loopguard.run.clock_skew": False})
    verdict = "the run fails the release rule: uncontained_loop: repeat at 5; budget: 40 calls"
    assert attrs(span) == {
        "loopguard.run.id": "run-1",
        "loopguard.run.outcome": "scored",
        "loopguard.run.clock_skew": False,
        "openinference.span.kind": "EVALUATOR",
        "input.value": json.dumps({"run_id": "run-1", "tool_calls": 7}),
        "input.mime_type": "application/json",
        "output.value": verdict,
        "output.mime_type": "text/plain",
        "loopguard.score.scorable": True,
        "loopguard.score.tool_calls": 7,
        "loopguard.score.release.passed": False,
        "loopguard.score.release.violations": FAILED["violations"],
        "loopguard.score.findings.repeat": 2,
        "loopguard.score.findings.budget": 1,
        "loopguard.score.loop_rate": 0.5,  # termination_reason None: left out
    }
    assert span.name == "loopguard.run scored/fail"
    assert (span.status.code, span.status.message) == (Status.STATUS_CODE_ERROR, verdict)
    assert (span.trace_id, span.parent_span_id, span.start_time_unix_nano, span.end_time_unix_nano) == (
        WHERE.trace_id, WHERE.parent_id, 1_000, 9_000)
    assert span.kind == Span.SPAN_KIND_INTERNAL and len(span.span_id) == 8


def test_a_passing_run_span_has_no_error_status() -> None:
    span = run_span("run-1", WHERE, {"tool_calls": 0, "release": PASSED}, {"loopguard.run.outcome": "scored"})
    a = attrs(span)
    assert span.status == Status()
    assert a["output.value"] == "the run passes the release rule"
    assert a["loopguard.score.release.passed"] is True and a["loopguard.score.release.violations"] == []
    assert a["input.value"] == json.dumps({"run_id": "run-1", "tool_calls": 0})  # zero calls is still a count


def test_an_unscored_run_says_why_no_verdict_was_given() -> None:
    score = {"scorable": False, "release": None, "termination_reason": "final_answer"}
    span = run_span("run-2", WHERE, score, {"loopguard.run.outcome": "integrity_error"})
    a = attrs(span)
    assert span.name == "loopguard.run integrity_error"
    assert a["output.value"] == "integrity_error: the run could not be scored, so the release rule was not applied"
    assert a["input.value"] == json.dumps({"run_id": "run-2"})  # no tool_calls counted
    assert a["loopguard.score.termination_reason"] == "final_answer"
    assert "loopguard.score.release" not in a and "loopguard.score.release.passed" not in a
    assert span.status == Status()
    # outcome not given: scored, and a scored run without a release rule result says so too
    plain = run_span("run-3", WHERE, {"tool_calls": 1}, {})
    assert plain.name == "loopguard.run scored"
    assert attrs(plain)["output.value"] == "scored: the run could not be scored, so the release rule was not applied"
    # a failing release on a run that is not "scored" is not applied either
    odd = run_span("run-4", WHERE, {"release": FAILED}, {"loopguard.run.outcome": "incomplete_trace"})
    assert attrs(odd)["output.value"].startswith("incomplete_trace: ")


def test_an_export_request_names_the_service_and_our_scope() -> None:
    spans = [finding_span(finding(), [], WHERE), run_span("run-1", WHERE, {"release": PASSED}, {})]
    request = export_request(spans, service_name="guard-7")
    (rs,) = request.resource_spans
    assert attributes(rs.resource.attributes) == {"service.name": "guard-7"}
    (ss,) = rs.scope_spans
    assert (ss.scope.name, ss.scope.version) == ("otel-loopguard", __version__)
    assert list(ss.spans) == spans
    default = export_request([])
    assert attributes(default.resource_spans[0].resource.attributes) == {"service.name": "otel-loopguard"}


def test_a_run_id_is_shown_unescaped_and_only_findings_by_kind_is_spread_per_kind() -> None:
    span = run_span("run-zürich", WHERE, {"release": PASSED, "by_tool": {"lookup": 3}}, {})
    a = attrs(span)
    assert "run-zürich" in a["input.value"]
    assert not any(k.startswith("loopguard.score.findings.") for k in a)
    assert "loopguard.score.by_tool" in a
