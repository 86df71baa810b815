"""Findings and run summaries as OTLP spans (CONTRACT.md section 2).

A finding is a NEW span in the trace of the run it judges: links to every
offending span, the same ids in `loopguard.finding.span_ids` (some backends
drop links), and one `loopguard.call` event per offending call.

So that a person notices them in the backend they already use, both kinds of span
also carry what backends render (v1.1): a name with low-cardinality detail
(`loopguard.finding stop repeat lookup_order`, `loopguard.run scored/fail`), status
ERROR for a stop and for a run that fails the release rule, OpenInference's span kind
and input/output values, and on a finding the GenAI `gen_ai.evaluation.result` event.
Consumers identify findings by `loopguard.finding.kind`, never by the exact name.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from ..version import __version__
from ..calls import ToolCall
from ..otlp import wire
from ..otlp.values import to_key_values
from .model import STOP, Finding
from .wording import with_next_step

FINDING_SPAN = "loopguard.finding"
RUN_SPAN = "loopguard.run"
CALL_EVENT = "loopguard.call"
EVALUATION_EVENT = "gen_ai.evaluation.result"  # GenAI semantic conventions (development)
# OpenInference span kinds: Phoenix draws a GUARDRAIL badge, an EVALUATOR one.
GUARDRAIL, EVALUATOR = "GUARDRAIL", "EVALUATOR"
MAX_INPUT_CHARS = 2000  # raw arguments in input.value: enough to read, not a copy of a payload
SCOPE = InstrumentationScope(name="otel-loopguard", version=__version__)


@dataclass(frozen=True)
class Placement:
    """Where a finding span goes: its trace, parent and time range."""

    trace_id: bytes
    parent_id: bytes
    start_ns: int
    end_ns: int


def place(calls: Sequence[ToolCall], roots: Mapping[str, str], now_ns: int) -> Optional[Placement]:
    """In the trace of the last offending call, under that trace's root span when known,
    else under the parent of the first offending call of that trace."""
    traced = [c for c in calls if c.trace_id]
    if not traced:
        return None
    trace = traced[-1].trace_id or ""
    same = [c for c in traced if c.trace_id == trace]
    parent = roots.get(trace) or same[0].parent_id or ""
    start = min((c.start_ns for c in same if c.start_ns), default=now_ns)
    end = max((c.end_ns for c in same if c.end_ns), default=now_ns)
    return Placement(trace_id=bytes.fromhex(trace), parent_id=bytes.fromhex(parent), start_ns=start, end_ns=max(end, start))


def place_at(trace_id: bytes, parent_id: bytes, start_ns: int, end_ns: int) -> Placement:
    return Placement(trace_id=trace_id, parent_id=parent_id, start_ns=start_ns, end_ns=max(end_ns, start_ns))


def _new_span(name: str, where: Placement) -> Span:
    return Span(
        trace_id=where.trace_id,
        span_id=_new_span_id(),
        parent_span_id=where.parent_id,
        name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=where.start_ns,
        end_time_unix_nano=where.end_ns,
    )


def is_own_span(name: str) -> bool:
    """A finding or run summary of ours, by name: bare (v1) or with detail (v1.1)."""
    return name.startswith("loopguard.") and name.split(" ", 1)[0] in (FINDING_SPAN, RUN_SPAN)


def finding_name(f: Finding, tool_label: Optional[str] = None) -> str:
    """`loopguard.finding <severity> <kind> <tool>`: the key words first, because backends cut
    names at their column's width (Jaeger's timeline, Phoenix's span tree); low cardinality, so
    `tool_label` (a bounded label, e.g. "other" past a limit) stands in for the tool when given."""
    tool = tool_label if tool_label is not None else f.tool
    return f"{FINDING_SPAN} {f.severity} {f.kind}" + (f" {tool}" if tool else "")


def finding_span(f: Finding, calls: Sequence[ToolCall], where: Placement, *, tool_label: Optional[str] = None,
                 arguments: Optional[str] = None, extra: Optional[Mapping[str, Any]] = None) -> Span:
    """`arguments`: the action's raw arguments, only when the receiver saw them unredacted
    (the backend already holds them on the tool spans); `extra`: more attributes (the waste).
    A stop's reason ends with what enforce mode would have done (findings/wording.py)."""
    f = with_next_step(f)
    span = _new_span(finding_name(f, tool_label), where)
    attrs = {**_finding_attributes(f), **_finding_conventions(f, arguments), **(extra or {})}
    # The evaluation (with the reason) is the first event, at the span's start: Jaeger opens a
    # span's logs, sorted by time, and leaves its tags folded.
    parts = [wire.attributes(attrs, wire.SPAN_ATTRIBUTE), wire.event(EVALUATION_EVENT, where.start_ns, _evaluation(f))]
    by_seq = {c.seq: c for c in calls}
    for seq, span_id in zip(f.seqs, f.span_ids):
        if not span_id:
            continue
        call = by_seq.get(seq)
        trace = bytes.fromhex(call.trace_id) if call and call.trace_id else where.trace_id
        parts.append(wire.link(trace, bytes.fromhex(span_id)))
        time_ns = (call.start_ns if call else None) or where.start_ns
        parts.append(wire.event(CALL_EVENT, time_ns, {"loopguard.seq": seq, "span_id": span_id}))
    span.MergeFromString(b"".join(parts))  # one C-level parse instead of an object per field
    if f.severity == STOP:
        span.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=f.reason))
    return span


def _finding_conventions(f: Finding, arguments: Optional[str]) -> dict[str, Any]:
    """OpenInference: a GUARDRAIL span whose input is what was judged and output the verdict."""
    judged: dict[str, Any] = {"tool": f.tool, "calls": _calls_range(f)} if f.tool else {"calls": _calls_range(f)}
    if arguments is not None:
        judged["arguments"] = arguments if len(arguments) <= MAX_INPUT_CHARS else arguments[:MAX_INPUT_CHARS] + "..."
    return {
        "openinference.span.kind": GUARDRAIL,
        "input.value": json.dumps(judged, ensure_ascii=False),
        "input.mime_type": "application/json",
        "output.value": f.reason,
        "output.mime_type": "text/plain",
    }


def _calls_range(f: Finding) -> str:
    return f"{f.first_seq}-{f.last_seq}" if f.first_seq != f.last_seq else str(f.first_seq)


def _evaluation(f: Finding) -> dict[str, Any]:
    """The GenAI evaluation result: the reason first (a log's fields show in order), the name
    says which check, the label its severity."""
    return {
        "gen_ai.evaluation.explanation": f.reason,
        "gen_ai.evaluation.name": f"loopguard.{f.kind}",
        "gen_ai.evaluation.score.label": f.severity,
    }


def _finding_attributes(f: Finding) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "loopguard.finding.kind": f.kind,
        "loopguard.finding.severity": f.severity,
        "loopguard.finding.first_seq": f.first_seq,
        "loopguard.finding.last_seq": f.last_seq,
        "loopguard.finding.count": f.count,
        "loopguard.finding.span_ids": [s for s in f.span_ids if s],
        "loopguard.finding.reason": f.reason,
        "loopguard.run.id": f.run_id,
        "loopguard.policy.version": f.policy_version,
    }
    if f.tool:
        attrs["loopguard.tool.name"] = f.tool
    if f.action:
        attrs["loopguard.args.digest"] = f.action
    return attrs


def run_name(outcome: str, score: Mapping[str, Any]) -> str:
    """`loopguard.run scored/pass`, `loopguard.run scored/fail`, `loopguard.run incomplete_trace` ..."""
    release = score.get("release")
    if outcome == "scored" and isinstance(release, Mapping):
        return f"{RUN_SPAN} scored/{'pass' if release['passed'] else 'fail'}"
    return f"{RUN_SPAN} {outcome}"


def run_span(run_id: str, where: Placement, score: Mapping[str, Any], extra: Mapping[str, Any]) -> Span:
    """The `loopguard.run` summary: every score field as `loopguard.score.<field>`; status
    ERROR (message: the broken rules) when the run fails the release rule."""
    outcome = str(extra.get("loopguard.run.outcome", "scored"))
    span = _new_span(run_name(outcome, score), where)
    verdict = _verdict(outcome, score)
    attrs: dict[str, Any] = {"loopguard.run.id": run_id, **extra, "openinference.span.kind": EVALUATOR,
                             "input.value": json.dumps(_run_input(run_id, score), ensure_ascii=False),
                             "input.mime_type": "application/json",
                             "output.value": verdict, "output.mime_type": "text/plain"}
    for key, value in score.items():
        if key == "release" and isinstance(value, Mapping):
            attrs["loopguard.score.release.passed"] = value["passed"]
            attrs["loopguard.score.release.violations"] = list(value["violations"])
        elif key == "findings_by_kind" and isinstance(value, Mapping):
            for kind, n in value.items():
                attrs[f"loopguard.score.findings.{kind}"] = n
        elif value is not None:
            attrs[f"loopguard.score.{key}"] = value
    span.MergeFromString(wire.attributes(attrs, wire.SPAN_ATTRIBUTE))
    release = score.get("release")
    if isinstance(release, Mapping) and not release["passed"]:
        span.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=verdict))
    return span


def _run_input(run_id: str, score: Mapping[str, Any]) -> dict[str, Any]:
    judged: dict[str, Any] = {"run_id": run_id}
    if score.get("tool_calls") is not None:
        judged["tool_calls"] = score["tool_calls"]
    return judged


def _verdict(outcome: str, score: Mapping[str, Any]) -> str:
    """One line a person reads in the backend: the release rule's verdict and why."""
    release = score.get("release")
    if outcome != "scored" or not isinstance(release, Mapping):
        return f"{outcome}: the run could not be scored, so the release rule was not applied"
    if release["passed"]:
        return "the run passes the release rule"
    return "the run fails the release rule: " + "; ".join(str(v) for v in release["violations"])


def export_request(spans: Sequence[Span], service_name: str = "otel-loopguard") -> ExportTraceServiceRequest:
    resource = Resource(attributes=to_key_values({"service.name": service_name}))
    scope_spans = ScopeSpans(scope=SCOPE, spans=list(spans))
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(resource=resource, scope_spans=[scope_spans])])


def _new_span_id() -> bytes:
    # As the OTel SDK's RandomIdGenerator: ids need to be unique, not secret, and a
    # system call per finding span cost more than the rest of its ids and times.
    while True:
        sid = random.getrandbits(64)
        if sid:
            return sid.to_bytes(8, "big")
