"""OTLP/JSON (the OTLP spec's JSON encoding) -> ExportTraceServiceRequest.

OTLP/JSON differs from the generic protobuf JSON mapping in one way that
matters here: trace and span ids are hex strings, not base64.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


class OtlpJsonError(ValueError):
    pass


def request_from_json(data: Any) -> ExportTraceServiceRequest:
    try:
        return json_format.ParseDict(_hex_ids_to_base64(data), ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpJsonError(str(exc)) from None


def _hex_ids_to_base64(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _id(v) if k in _ID_KEYS else _hex_ids_to_base64(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids_to_base64(x) for x in node]
    return node


def _id(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    except ValueError:
        raise OtlpJsonError(f"id {value[:40]!r} is not hex (OTLP/JSON encodes ids as hex)") from None


def request_to_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """The inverse of request_from_json: OTLP/JSON as the Collector's file exporter writes it
    (camelCase names, hex ids). Used to write example traces (scripts/)."""
    return _base64_ids_to_hex(json_format.MessageToDict(request))


def _base64_ids_to_hex(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _base64_ids_to_hex(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [_base64_ids_to_hex(x) for x in node]
    return node
