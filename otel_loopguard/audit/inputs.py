"""Read audit input files of any supported format into runs.

NDJSON tool-call records, OTLP/JSON (one request per file, or one per line as
the Collector's file exporter writes), and serialized OTLP protobuf
`ExportTraceServiceRequest`s. Runs with the same id are merged across files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..errors import InputError
from ..otlp.json_format import OtlpJsonError, request_from_json
from ..otlp.spans import SpanCollector
from ..score import RunInput
from .ndjson import parse_json, read_ndjson
from .runs import RunBuilder

PROTOBUF_SUFFIXES = (".pb", ".binpb", ".protobuf")
MAX_INPUT_BYTES = 512 * 1024 * 1024


def read_runs(paths: Iterable[Path], run_id_attribute: Optional[str] = None, dense_seq: bool = False) -> list[RunInput]:
    """`dense_seq`: every sequence is numbered 1..N, so a gap is a missing call (otherwise
    only sequences their source marks dense are: the processor's loopguard.seq)."""
    return read_inputs(paths, run_id_attribute, dense_seq)[0]


def read_inputs(paths: Iterable[Path], run_id_attribute: Optional[str] = None, dense_seq: bool = False,
                sources: Optional[dict[str, list[Path]]] = None) -> tuple[list[RunInput], list[Path]]:
    """The runs, and the files that held no tool call (valid, but nothing to judge in them).
    `sources`, when given, is filled with each run's files, in the order read (the JUnit report
    puts a run in its first file's suite)."""
    records = RunBuilder()
    spans = SpanCollector(run_id_attribute)
    empty: list[Path] = []
    for path in paths:
        before = records.tool_calls + spans.tool_calls
        records.source = Path(path)
        _read_file(Path(path), records, spans)
        if records.tool_calls + spans.tool_calls == before:
            empty.append(Path(path))
    records.source = None  # the spans' runs below note their own files
    for run_id, calls, models, facts in spans.runs():
        for call in calls:
            records.add_call(run_id, call)
        for model in models:
            records.add_model(run_id, model)
        if facts is not None:  # only what spans recorded; NDJSON run records stay
            records.set_facts(run_id, facts)
        records.add_guards(run_id, spans.guard_events(run_id))
        records.add_decisions(run_id, spans.decisions(run_id, calls))
    if sources is not None:
        for run_id, files in [*records.sources.items(), *spans.sources.items()]:
            known = sources.setdefault(run_id, [])
            known += [f for f in files if f not in known]
    return records.runs(dense_seq), empty


def _read_file(path: Path, records: RunBuilder, spans: SpanCollector) -> None:
    data = _read_bytes(path)
    if path.suffix in PROTOBUF_SUFFIXES:
        spans.add(_protobuf(path, data), path)
        return
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")  # a byte order mark, as some editors write
    except UnicodeDecodeError:
        spans.add(_protobuf(path, data), path)
        return
    first = next((line for line in text.splitlines() if line.strip()), "")
    if not first.lstrip().startswith("{"):
        if text.strip():
            spans.add(_protobuf(path, data), path)
        return
    if _is_otlp_json(text, first):
        for request in _otlp_json(path, text):
            spans.add(request, path)
    else:
        read_ndjson(path, text, records)


def _read_bytes(path: Path) -> bytes:
    try:
        if path.stat().st_size > MAX_INPUT_BYTES:
            raise InputError(f"{path}: larger than {MAX_INPUT_BYTES // 2**20} MiB; split it")
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None


def _is_otlp_json(text: str, first: str) -> bool:
    head = first if len(first) < 4096 else first[:4096]
    return '"resourceSpans"' in head or '"resource_spans"' in head or (
        head.strip() == "{" and ('"resourceSpans"' in text[:4096] or '"resource_spans"' in text[:4096])
    )


def _otlp_json(path: Path, text: str) -> list[ExportTraceServiceRequest]:
    """One JSON document, or one request per line (the Collector's file exporter)."""
    try:
        documents: list[Any] = [parse_json(path, 0, text)]
    except InputError:
        if text.lstrip().split("\n", 1)[0].strip() == "{":
            raise  # a pretty-printed document: its own error says where it breaks
        documents = [parse_json(path, number, line) for number, line in enumerate(text.splitlines(), start=1)
                     if line.strip()]
    out = []
    for i, doc in enumerate(documents, start=1):
        try:
            out.append(request_from_json(doc))
        except OtlpJsonError as exc:
            raise InputError(f"{path}: OTLP/JSON request {i} is invalid: {exc}") from None
        except RecursionError:
            raise InputError(f"{path}: OTLP/JSON request {i} is nested too deeply to read") from None
    return out



def _protobuf(path: Path, data: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    problem = ""
    try:
        request.ParseFromString(data)
    except (DecodeError, RuntimeError) as exc:
        problem = f" ({exc})"
    # Protobuf accepts almost any bytes as unknown fields; a trace export has valid spans.
    if problem or (data and not _has_valid_span(request)):
        raise InputError(
            f"{path}: not NDJSON records, OTLP/JSON or an OTLP protobuf ExportTraceServiceRequest{problem}"
        ) from None
    return request


def _has_valid_span(request: ExportTraceServiceRequest) -> bool:
    return any(
        len(span.trace_id) == 16 and len(span.span_id) == 8
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    )
