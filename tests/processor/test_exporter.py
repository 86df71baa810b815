"""The zero-code path: LoopguardSpanExporter and the `loopguard_otlp` entry point."""

from __future__ import annotations

import importlib.metadata
import socket
from typing import Any, Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.processor import (
    LoopguardOTLPSpanExporter,
    LoopguardSpanExporter,
    ProcessorConfig,
    build_tagger,
    install,
)
from otel_loopguard.processor.tagger import Tagger

from .helpers import CONTRACT_TAGS, HEX32, KEY, RAW_KEYS, decisions, emit_turn, tags


class Pipeline:
    def __init__(self, config: ProcessorConfig = ProcessorConfig(), **key: Any) -> None:
        self.inner = InMemorySpanExporter()
        self.tagger = build_tagger(config, **(key or {"key": KEY}))
        self.tp = TracerProvider()
        self.tp.add_span_processor(BatchSpanProcessor(LoopguardSpanExporter(self.inner, self.tagger), schedule_delay_millis=20))
        self.tracer = self.tp.get_tracer("zero-code")

    def tools(self) -> list[Any]:
        assert self.tp.force_flush(10_000)
        return sorted((s for s in self.inner.get_finished_spans() if "lookup_order" in s.name), key=lambda s: s.start_time)


@pytest.fixture
def pipeline() -> Iterator[Pipeline]:
    p = Pipeline()
    yield p
    p.tp.shutdown()


def test_the_exporter_wrapper_tags_tool_spans_under_a_batch_processor(pipeline: Pipeline) -> None:
    with pipeline.tracer.start_as_current_span("agent"):
        for _ in range(5):
            emit_turn(pipeline.tracer, "tl_lc_tool_1")
    tools = pipeline.tools()
    assert all(set(CONTRACT_TAGS) <= set(tags(s)) for s in tools)
    assert [tags(s)["loopguard.seq"] for s in tools] == [1, 2, 3, 4, 5]
    assert [tags(s)["loopguard.turn"] for s in tools] == [1, 2, 3, 4, 5]
    assert len({tags(s)["loopguard.args.digest"] for s in tools}) == 1 and HEX32.match(tags(tools[0])["loopguard.args.digest"])
    assert tags(tools[0])["loopguard.key.id"] == pipeline.tagger.key_id
    assert [d["loopguard.decision"] for d in decisions(tools[4], "repeat")] == ["would_block"]


def test_the_exporter_wrapper_redacts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_REDACT", "true")
    p = Pipeline(config=None, key=KEY)  # type: ignore[arg-type]  # build_tagger(None): settings from the environment
    try:
        emit_turn(p.tracer, "oi_lc_tool_1")
        [tool] = p.tools()
        assert [k for k in RAW_KEYS if k in tool.attributes] == [] and "loopguard.args.digest" in tool.attributes
    finally:
        p.tp.shutdown()


def test_a_tagger_failure_in_the_exporter_exports_the_batch_untagged(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Tagger, "tag", lambda self, span: 1 / 0)
    with pipeline.tracer.start_as_current_span("agent"):
        emit_turn(pipeline.tracer, "genai_tool")
    assert pipeline.tp.force_flush()
    spans = pipeline.inner.get_finished_spans()
    assert len(spans) == 3 and all(tags(s) == {} for s in spans)


def test_processor_and_exporter_together_tag_once() -> None:
    """opentelemetry-instrument with loopguard_otlp plus an explicit install(): no double numbering."""
    p = Pipeline()
    try:
        install(tracer_provider=p.tp, key=KEY)
        with p.tracer.start_as_current_span("agent"):
            for _ in range(5):
                emit_turn(p.tracer, "genai_tool")
        tools = p.tools()
        assert [tags(s)["loopguard.seq"] for s in tools] == [1, 2, 3, 4, 5]
        assert [len(decisions(s, "repeat")) for s in tools] == [0, 0, 1, 0, 1]
    finally:
        p.tp.shutdown()


def test_the_entry_point_is_registered_and_loads_the_otlp_exporter() -> None:
    [ep] = [e for e in importlib.metadata.entry_points(group="opentelemetry_traces_exporter") if e.name == "loopguard_otlp"]
    cls = ep.load()
    assert cls is LoopguardOTLPSpanExporter and issubclass(cls, SpanExporter)


def test_the_sdk_configurator_resolves_loopguard_otlp() -> None:
    """What `OTEL_TRACES_EXPORTER=loopguard_otlp opentelemetry-instrument` does to find the class."""
    from opentelemetry.sdk._configuration import _import_exporters

    traces, _, _ = _import_exporters(["loopguard_otlp"], [], [])
    assert traces == {"loopguard_otlp": LoopguardOTLPSpanExporter}


def test_the_entry_point_class_builds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "enforce")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    exporter = LoopguardOTLPSpanExporter()  # the configurator passes no arguments
    try:
        assert isinstance(exporter._inner, OTLPSpanExporter)  # noqa: SLF001
        assert exporter._tagger.key_id == build_tagger(ProcessorConfig(), key=KEY).key_id  # noqa: SLF001
        assert exporter._tagger._config.mode == "enforce"  # noqa: SLF001
    finally:
        exporter.shutdown()
