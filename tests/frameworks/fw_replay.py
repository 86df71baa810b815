"""A framework capture replayed through install(): its spans started and ended in the capture's
time order on a real TracerProvider with the loop guard installed, with the capture's ids of
parents kept as real span contexts and the attributes the framework set at start set at start
(the rest just before the end, as the instrumentations do). What the processor exports is
encoded with the OTLP exporter's own encoder, for the audit to read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from otel_loopguard.otlp.json_format import request_to_json
from otel_loopguard.processor import install

BASE_NS = 1_767_225_600_000_000_000


def _events(spans: list[dict[str, Any]]) -> list[tuple[float, int, int, dict[str, Any]]]:
    """(time, 0 start / 1 end, depth, span): at one instant, parents start first, children end first."""
    by_id = {s["span_id"]: s for s in spans}

    def depth(s: dict[str, Any]) -> int:
        n = 0
        while s.get("parent_span_id") in by_id:
            s, n = by_id[s["parent_span_id"]], n + 1
        return n

    out = []
    for s in spans:
        d = depth(s)
        out += [(s["start_ms"], 0, d, s), (s["end_ms"], 1, -d, s)]
    return sorted(out, key=lambda e: e[:3])


def replay(capture: Path, out: Path, key: str) -> Path:
    """The capture through install(); the exported spans as an OTLP/JSON file at `out`."""
    doc = json.loads(capture.read_text(encoding="utf-8"))
    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "fw-replay"}))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    install(tracer_provider=tp, key=key)
    live: dict[str, Any] = {}
    try:
        for ms, kind, _, s in _events(doc["spans"]):
            if kind == 0:
                parent = _parent(live, s)
                ctx = trace.set_span_in_context(parent) if parent is not None else None
                at_start = set(s.get("attribute_keys_at_start", ()))
                span = tp.get_tracer(s.get("scope") or "capture").start_span(
                    s["name"], context=ctx, start_time=BASE_NS + int(ms * 1e6),
                    attributes={k: v for k, v in s["attributes"].items() if k in at_start})
                live[s["span_id"]] = span
            else:
                _end(live[s["span_id"]], s, BASE_NS + int(ms * 1e6))
        assert tp.force_flush(10_000)
        request = encode_spans(exporter.get_finished_spans())
    finally:
        tp.shutdown()
    out.write_text(json.dumps(request_to_json(request)) + "\n", encoding="utf-8")
    return out


def _parent(live: dict[str, Any], s: dict[str, Any]) -> Any:
    """The span's parent: replayed already, else (a parent the capture never exported: CrewAI's
    OpenInference wrappers) a remote one with the capture's ids, so the trace stays one."""
    pid = s.get("parent_span_id") or ""
    if not pid or pid in live:
        return live.get(pid)
    return NonRecordingSpan(SpanContext(int(s["trace_id"], 16), int(pid, 16), is_remote=True,
                                        trace_flags=TraceFlags(TraceFlags.SAMPLED)))


def _end(span: Any, s: dict[str, Any], end_ns: int) -> None:
    span.set_attributes(s["attributes"])
    for e in s.get("events", []):
        at = BASE_NS + int(e.get("time_ms", s["start_ms"]) * 1e6)
        span.add_event(e["name"], e.get("attributes", {}), timestamp=at)
    if s["status"]["code"] == "ERROR":
        span.set_status(Status(StatusCode.ERROR, s["status"].get("description")))
    elif s["status"]["code"] == "OK":
        span.set_status(Status(StatusCode.OK))
    span.end(end_time=end_ns)
