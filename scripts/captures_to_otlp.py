"""Write the recorded framework captures (research/conventions/captures/, in the research
tools' own JSON) as OTLP/JSON files that `otel-loopguard audit` and `calibrate` read: one
ExportTraceServiceRequest a line, as the Collector's file exporter writes them.

    .venv/bin/python scripts/captures_to_otlp.py OUT_DIR

Times are the capture's own (milliseconds from the run's start) on a fixed base.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_loopguard.otlp.json_format import request_to_json
from otel_loopguard.otlp.values import to_key_values

CAPTURES = Path(__file__).resolve().parents[1] / "research" / "conventions" / "captures"
BASE_NS = 1_767_225_600_000_000_000  # 2026-01-01, any fixed instant
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def capture_files() -> list[Path]:
    return sorted(p for p in CAPTURES.rglob("*.json"))


def to_span(s: dict[str, Any]) -> Span:
    parent = s.get("parent_span_id") or ""
    return Span(
        trace_id=bytes.fromhex(s["trace_id"]), span_id=bytes.fromhex(s["span_id"]),
        parent_span_id=bytes.fromhex(parent) if parent else b"",
        name=s["name"], kind=getattr(Span, f"SPAN_KIND_{s['kind']}"),
        start_time_unix_nano=BASE_NS + int(s["start_ms"] * 1e6), end_time_unix_nano=BASE_NS + int(s["end_ms"] * 1e6),
        attributes=to_key_values(s["attributes"]),
        events=[Span.Event(name=e["name"], time_unix_nano=BASE_NS + int(e.get("time_ms", s["start_ms"]) * 1e6),
                           attributes=to_key_values(e.get("attributes", {}))) for e in s.get("events", [])],
        status={"code": _STATUS[s["status"]["code"]], "message": s["status"].get("description") or ""},
    )


def convert(capture: Path, out_dir: Path) -> Path:
    spans = [to_span(s) for s in json.loads(capture.read_text(encoding="utf-8"))["spans"]]
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    out = out_dir / f"{capture.stem}.otlp.json"
    out.write_text(json.dumps(request_to_json(request)) + "\n", encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [convert(c, out_dir) for c in capture_files()]
    print(f"wrote {len(files)} OTLP/JSON files to {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
