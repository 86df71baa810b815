"""Shared capture helpers for the convention research scripts (not part of the package).

Sets up an opentelemetry-sdk TracerProvider with an InMemorySpanExporter plus a
SpanProcessor that snapshots each span's attributes at on_start, and dumps every
finished span (name, kind, ids, parent, attributes, attributes-at-start, status,
events) to JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib import metadata
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.join(HERE, "captures")


class StartRecorder(SpanProcessor):
    """Records a copy of span.attributes as they are when the span starts."""

    def __init__(self) -> None:
        self.at_start: dict[int, dict[str, Any]] = {}
        self.live: dict[int, Any] = {}
        self.during_body: dict[int, list[str]] = {}
        self.current_in_body: list[list[str | None]] = []

    def on_start(self, span, parent_context=None) -> None:  # noqa: D401
        self.at_start[span.context.span_id] = dict(span.attributes or {})
        self.live[span.context.span_id] = span

    def on_end(self, span) -> None:
        self.live.pop(span.context.span_id, None)

    def probe(self, tool_name: str) -> None:
        """Called from inside a tool body: snapshot the attribute keys of the still-open span(s)
        that look like this tool's span (name contains the tool name), i.e. what an in-process
        processor could read while the tool is running."""
        cur = trace.get_current_span()
        self.current_in_body.append([tool_name, getattr(cur, "name", None)])
        for sid, span in list(self.live.items()):
            if tool_name in (span.name or ""):
                self.during_body[sid] = sorted((span.attributes or {}).keys())

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def setup() -> tuple[TracerProvider, InMemorySpanExporter, StartRecorder]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    recorder = StartRecorder()
    provider.add_span_processor(recorder)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider, exporter, recorder


def _val(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_val(x) for x in v]
    return v


def _hex(i: int | None, width: int) -> str | None:
    return None if i is None else format(i, f"0{width}x")


def versions(names: list[str]) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def dump(path: str, exporter: InMemorySpanExporter, recorder: StartRecorder, meta: dict[str, Any]) -> list[dict]:
    spans = sorted(exporter.get_finished_spans(), key=lambda s: (s.start_time, s.end_time))
    t0 = spans[0].start_time if spans else 0
    rows = []
    for s in spans:
        at_start = recorder.at_start.get(s.context.span_id, {})
        attrs = {k: _val(v) for k, v in (s.attributes or {}).items()}
        rows.append(
            {
                "name": s.name,
                "kind": s.kind.name,
                "trace_id": _hex(s.context.trace_id, 32),
                "span_id": _hex(s.context.span_id, 16),
                "parent_span_id": _hex(s.parent.span_id, 16) if s.parent else None,
                "scope": s.instrumentation_scope.name if s.instrumentation_scope else None,
                "start_ms": round((s.start_time - t0) / 1e6, 3),
                "end_ms": round((s.end_time - t0) / 1e6, 3),
                "attributes": attrs,
                "attribute_keys_at_start": sorted(at_start.keys()),
                "attribute_keys_only_at_end": sorted(set(attrs) - set(at_start)),
                "attribute_keys_during_tool_body": recorder.during_body.get(s.context.span_id),
                "status": {"code": s.status.status_code.name, "description": s.status.description},
                "events": [
                    {"name": e.name, "attributes": {k: _val(v) for k, v in (e.attributes or {}).items()}}
                    for e in s.events
                ],
                "links": len(s.links),
            }
        )
    # Parent names for readability.
    by_id = {r["span_id"]: r["name"] for r in rows}
    for r in rows:
        r["parent_name"] = by_id.get(r["parent_span_id"]) if r["parent_span_id"] else None
    meta = dict(meta, current_span_in_tool_body=recorder.current_in_body)
    doc = {"meta": meta, "span_count": len(rows), "spans": rows}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, default=str)
        f.write("\n")
    return rows


def tree(rows: list[dict]) -> str:
    """Indented tree of span names (with a few key attributes) for quick reading."""
    children: dict[str | None, list[dict]] = {}
    ids = {r["span_id"] for r in rows}
    for r in rows:
        p = r["parent_span_id"] if r["parent_span_id"] in ids else None
        children.setdefault(p, []).append(r)
    keys = (
        "openinference.span.kind", "gen_ai.operation.name", "traceloop.span.kind",
        "tool.name", "gen_ai.tool.name", "traceloop.entity.name", "gen_ai.tool.call.id",
    )
    out: list[str] = []

    def walk(pid: str | None, depth: int) -> None:
        for r in children.get(pid, []):
            tags = ", ".join(f"{k}={r['attributes'][k]}" for k in keys if k in r["attributes"])
            st = r["status"]["code"]
            out.append(f"{'  ' * depth}- {r['name']} [{r['kind']}, {st}] {tags}")
            walk(r["span_id"], depth + 1)

    walk(None, 0)
    return "\n".join(out)


class Timer:
    def __enter__(self):
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = round(time.perf_counter() - self.t, 3)


def python_version() -> str:
    return sys.version.split()[0]
