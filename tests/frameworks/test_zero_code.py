"""The zero-code path: two instrumentations of one framework, and a setup that exports nothing.

- OpenInference's and OpenLLMetry's LangChain instrumentations both active (what
  `opentelemetry-instrument` does when both are installed): each call yields two tool spans in
  two span trees, with different digests (OpenInference keeps a single argument as a bare
  value). The processor counts each call once: the second span is tagged
  `loopguard.duplicate_of`, shares its twin's `loopguard.seq`, and no false cycle is found;
  the audit of the exported spans counts the calls that ran.
- `opentelemetry-instrument` itself, in a subprocess, warns about both problems.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("langchain.agents")

from langchain_core.tools import tool  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from otel_loopguard.processor import install  # noqa: E402

from .lc_helpers import KEY, _undo_openllmetry_patches, model, repeat, run_agent  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def both(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    for name in [n for n in os.environ if n.startswith("OTEL_LOOPGUARD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TRACELOOP_METRICS_ENABLED", "false")
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(tracer_provider=provider, key=KEY)
    oi, ol = LangChainInstrumentor(), LangchainInstrumentor()
    oi.instrument(tracer_provider=provider)
    ol.instrument(tracer_provider=provider)
    try:
        yield provider, exporter
    finally:
        oi.uninstrument()
        ol.uninstrument()
        _undo_openllmetry_patches()
        provider.shutdown()


def _tool_spans(spans: Any) -> list:
    out = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "TOOL"
           or (s.attributes or {}).get("traceloop.span.kind") == "tool"]
    return sorted(out, key=lambda s: s.start_time or 0)


def _agent(provider: TracerProvider, script: list) -> list:
    invoked: list = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "delivered", "order": order_id}

    with provider.get_tracer("zero-code").start_as_current_span("invoke_agent support"):
        run_agent(model(script), [lookup_order])
    return invoked


def test_two_instrumentations_of_langchain_count_each_call_once(
        both: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    provider, exporter = both
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        invoked = _agent(provider, repeat("lookup_order", {"order_id": "A12"}, 3) + ["done"])
        assert provider.force_flush(10_000)
    spans = exporter.get_finished_spans()
    tools = _tool_spans(spans)
    assert len(invoked) == 3 and len(tools) == 6  # each call traced twice
    counted = [s for s in tools if "loopguard.duplicate_of" not in s.attributes]
    twins = [s for s in tools if "loopguard.duplicate_of" in s.attributes]
    assert len(counted) == 3 and len(twins) == 3
    assert sorted(s.attributes["loopguard.seq"] for s in counted) == [1, 2, 3]  # no gap, no double number
    by_id = {format(s.context.span_id, "016x"): s for s in counted}
    for twin in twins:
        assert twin.attributes["loopguard.seq"] == by_id[twin.attributes["loopguard.duplicate_of"]].attributes["loopguard.seq"]
        assert twin.instrumentation_scope.name != by_id[twin.attributes["loopguard.duplicate_of"]].instrumentation_scope.name
    marks = [e.attributes for s in tools for e in s.events if e.name == "loopguard.decision"]
    assert not [m for m in marks if m["loopguard.finding.kind"] == "cycle"]  # the false cycle is gone
    assert [m["loopguard.decision"] for m in marks] == ["would_warn"]  # the 3rd identical call, once
    assert "openinference.instrumentation.langchain" in caplog.text
    assert "opentelemetry.instrumentation.langchain" in caplog.text

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_loopguard.audit import audit

    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    path = tmp_path / "both.pb"
    path.write_bytes(encode_spans(spans).SerializeToString())
    (report,) = audit([path])
    assert report.outcome == "scored" and report.score["tool_calls"] == 3
    assert "cycle" not in report.score["findings_by_kind"]


def test_two_instrumentations_of_langchain_count_each_model_request_once(
        both: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28, defect 3: a clean run of 15 model requests and 14 distinct calls, traced by both
    instrumentations, is 15 turns to the processor, the audit and the receiver, not 30 (which
    broke the turn budget of 25): the second model span of each request carries
    loopguard.duplicate_of, as tool twins do."""
    provider, exporter = both
    invoked = _agent(provider, [[("lookup_order", {"order_id": f"A{i}"})] for i in range(14)] + ["done"])
    assert provider.force_flush(10_000)
    spans = exporter.get_finished_spans()
    models = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "LLM"
              or (s.attributes or {}).get("gen_ai.operation.name") == "chat"
              or (s.attributes or {}).get("llm.request.type") == "chat"]
    twins = [s for s in models if "loopguard.duplicate_of" in s.attributes]
    assert len(invoked) == 14 and len(models) == 30 and len(twins) == 15
    counted = {format(s.context.span_id, "016x") for s in models} - {format(s.context.span_id, "016x") for s in twins}
    assert {s.attributes["loopguard.duplicate_of"] for s in twins} == counted

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_loopguard.audit import audit

    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    path = tmp_path / "both-models.pb"
    path.write_bytes(encode_spans(spans).SerializeToString())
    (report,) = audit([path])
    assert report.outcome == "scored" and report.score["tool_calls"] == 14
    assert "budget" not in report.score["findings_by_kind"], report.score
    assert report.passed, report.score


def test_negative_control_one_instrumentation_tags_no_duplicate(tmp_path: Path) -> None:
    from .lc_helpers import instrumented

    with instrumented("openllmetry") as stack:
        invoked: list = []

        @tool
        def lookup_order(order_id: str) -> dict:
            """Look up an order's status."""
            invoked.append(order_id)
            return {"status": "delivered", "order": order_id}

        # parallel identical calls of one turn: siblings of one instrumentation, both counted
        run_agent(model([[("lookup_order", {"order_id": "A12"}), ("lookup_order", {"order_id": "A12"})], "done"]),
                  [lookup_order])
        tools = stack.tool_spans(stack.spans())
    assert len(invoked) == 2 and len(tools) == 2
    assert not any("loopguard.duplicate_of" in s.attributes for s in tools)
    assert sorted(s.attributes["loopguard.seq"] for s in tools) == [1, 2]


def test_the_setup_check_names_what_is_missing() -> None:
    from opentelemetry.trace import ProxyTracerProvider

    from otel_loopguard.processor.zero_code import setup_problems

    assert "opentelemetry-distro" not in " ".join(setup_problems(TracerProvider(), []))
    [no_sdk] = setup_problems(ProxyTracerProvider(), [])
    assert "no OpenTelemetry SDK tracer provider" in no_sdk and "otel-loopguard[zero-code]" in no_sdk
    [no_exporter] = setup_problems(TracerProvider(), [])
    assert "no exporter is configured" in no_exporter
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    assert setup_problems(provider, []) == []  # negative control: a provider that exports


SCRIPT = """
import os
from langchain_core.tools import tool
from tests.frameworks.lc_helpers import model, run_agent
@tool
def lookup_order(order_id: str) -> dict:
    '''Look up an order.'''
    return {"status": "delivered"}
run_agent(model([[("lookup_order", {"order_id": "A12"})], "done"]), [lookup_order])
print("ran")
"""


def test_opentelemetry_instrument_warns_about_both_instrumentations_and_no_exporter() -> None:
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    if not instrument.exists():
        pytest.skip("opentelemetry-instrument is not installed (the zero-code extra)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELOOP_"))}
    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
               TRACELOOP_METRICS_ENABLED="false", OTEL_LOOPGUARD_KEY=KEY, PYTHONPATH=str(ROOT))
    done = subprocess.run([str(instrument), sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ran" in done.stdout, done.stderr[-2000:]
    assert "no exporter is configured" in done.stderr, done.stderr[-2000:]
    assert "two instrumentations of 'langchain' are both active" in done.stderr
    assert "openinference-instrumentation-langchain" in done.stderr
    assert "opentelemetry-instrumentation-langchain" in done.stderr


def _both_agents_bridges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list, Any]:
    import asyncio  # noqa: F401 - run_agent drives the SDK with asyncio

    from agents import function_tool, set_trace_processors
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor as OpenInference
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor as OpenLLMetry

    from .agents_helpers import repeat as agent_repeat
    from .agents_helpers import run_agent as run_agents_sdk

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-no-network")
    monkeypatch.setenv("TRACELOOP_METRICS_ENABLED", "false")
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(tracer_provider=provider, key=KEY)
    set_trace_processors([])
    bridges = [OpenInference(), OpenLLMetry()]
    for bridge in bridges:
        bridge.instrument(tracer_provider=provider)
    invoked: list = []

    @function_tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order."""
        invoked.append(order_id)
        return {"status": "delivered"}

    try:
        with provider.get_tracer("zero-code").start_as_current_span("invoke_agent support"):
            run_agents_sdk([lookup_order], agent_repeat(("lookup_order", {"order_id": "A12"}), 3) + ["done"])
        assert provider.force_flush(10_000)
        return invoked, exporter.get_finished_spans()
    finally:
        for bridge in bridges:
            bridge.uninstrument()
        set_trace_processors([])
        provider.shutdown()


def test_two_agents_sdk_bridges_count_each_call_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    invoked, spans = _both_agents_bridges(tmp_path, monkeypatch)
    tools = _tool_spans(spans)
    assert len(invoked) == 3 and len(tools) == 6
    counted = [s for s in tools if "loopguard.duplicate_of" not in s.attributes]
    assert len(counted) == 3
    marks = [(e.attributes["loopguard.decision"], e.attributes["loopguard.finding.kind"])
             for s in counted for e in s.events if e.name == "loopguard.decision"]
    # Counted twice, the 2nd call would be the 3rd and 4th identical ones and the 3rd a stop.
    assert marks == [("would_warn", "repeat")]  # the 3rd identical call, as with one bridge


@pytest.mark.xfail(strict=True, reason="LIMIT (docs/processor.md): both Agents SDK bridges number their "
                   "spans at start, so a duplicate's own number is a gap and the audit cannot score the run")
def test_two_agents_sdk_bridges_leave_a_sequence_the_audit_can_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_loopguard.audit import audit

    _, spans = _both_agents_bridges(tmp_path, monkeypatch)
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    path = tmp_path / "agents-both.pb"
    path.write_bytes(encode_spans(spans).SerializeToString())
    (report,) = audit([path])
    assert report.outcome == "scored" and report.score["tool_calls"] == 3
