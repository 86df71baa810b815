"""A SpanExporter that tags tool spans, then exports them over OTLP/gRPC.

The zero-code path: `OTEL_TRACES_EXPORTER=loopguard_otlp opentelemetry-instrument app.py`
picks it up through the `opentelemetry_traces_exporter` entry point. It tags on
the export thread (the batch processor's), so the application never waits.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .tagger import Tagger, interesting

_log = logging.getLogger("otel_loopguard.processor")


class LoopguardSpanExporter(SpanExporter):
    """Wraps any SpanExporter; tool spans leave tagged."""

    def __init__(self, inner: SpanExporter, tagger: Tagger):
        self._inner = inner
        self._tagger = tagger

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([self._tag(s) for s in spans])

    def _tag(self, span: ReadableSpan) -> ReadableSpan:
        try:
            return self._tagger.tag(span) if interesting(span) else self._tagger.mark_root(span)
        except Exception:
            _log.exception("otel-loopguard: error while tagging a span; exported untagged")
            return self._tagger.untagged(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class LoopguardOTLPSpanExporter(LoopguardSpanExporter):
    """OTLP/gRPC exporter configured by the standard OTEL_EXPORTER_OTLP_* settings."""

    def __init__(self, **kwargs: Any):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        from .install import build_tagger

        super().__init__(OTLPSpanExporter(**kwargs), build_tagger())


