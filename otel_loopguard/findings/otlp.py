"""Findings and run summaries as OTLP spans (CONTRACT.md section 2).

A finding is a NEW span in the trace of the run it judges: links to every
offending span, the same ids in `loopguard.finding.span_ids` (some backends
drop links), and one `loopguard.call` event per offending call.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from .. import __version__
from ..calls import ToolCall
from ..otlp import wire
from ..otlp.values import to_key_values
from .model import Finding

FINDING_SPAN = "loopguard.finding"
RUN_SPAN = "loopguard.run"
CALL_EVENT = "loopguard.call"
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
    return Placement(bytes.fromhex(trace), bytes.fromhex(parent), start, max(end, start))


def place_at(trace_id: bytes, parent_id: bytes, start_ns: int, end_ns: int) -> Placement:
    return Placement(trace_id, parent_id, start_ns, max(end_ns, start_ns))


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


def finding_span(f: Finding, calls: Sequence[ToolCall], where: Placement) -> Span:
    span = _new_span(FINDING_SPAN, where)
    parts = [wire.attributes(_finding_attributes(f), wire.SPAN_ATTRIBUTE)]
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
    return span


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


def run_span(run_id: str, where: Placement, score: Mapping[str, Any], extra: Mapping[str, Any]) -> Span:
    """The `loopguard.run` summary: every score field as `loopguard.score.<field>`."""
    span = _new_span(RUN_SPAN, where)
    attrs: dict[str, Any] = {"loopguard.run.id": run_id, **extra}
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
    return span


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
