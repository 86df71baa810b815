"""`otel_loopguard.install()`: one line, idempotent, finds or makes the SDK provider, clear errors."""

from __future__ import annotations

import socket
from typing import Any, Callable, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import otel_loopguard
from otel_loopguard.errors import LoopguardError
from otel_loopguard.processor import LoopguardHandle, LoopguardSpanProcessor, ProcessorConfigError, install
from otel_loopguard.processor.sdk_shape import span_processors

from .helpers import KEY, Stack, captured, emit, emit_turn, tags


@pytest.fixture
def fresh_global(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process with no global tracer provider yet; the one a test sets is shut down, then forgotten."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    yield
    provider = trace._TRACER_PROVIDER  # noqa: SLF001 - monkeypatch restores the real global after this
    if isinstance(provider, TracerProvider):
        provider.shutdown()


def _guards(provider: TracerProvider) -> list[Any]:
    return [p for p in span_processors(provider) if isinstance(p, LoopguardSpanProcessor)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_install_is_idempotent_and_tags_once(stack: Stack) -> None:
    first = stack.handle
    again = install(tracer_provider=stack.tp, key=KEY)
    assert again is first
    # Other settings are refused, not silently ignored (tests/processor/test_reinstall.py).
    with pytest.raises(ProcessorConfigError, match="already installed"):
        install(tracer_provider=stack.tp, key="another-key-0123456789", mode="enforce", redact=True)
    assert isinstance(first, LoopguardHandle) and len(_guards(stack.tp)) == 1
    emit_turn(stack.tracer, "genai_tool")
    [tool] = stack.tool_spans()
    assert tags(tool)["loopguard.seq"] == 1 and tags(tool)["loopguard.mode"] == "observe"
    assert len(stack.spans()) == 2, "each span exported once"


def test_install_finds_the_global_sdk_provider(fresh_global: None) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    handle = otel_loopguard.install(key=KEY)  # the documented one line
    assert handle.provider is provider
    assert otel_loopguard.install() is handle and install(tracer_provider=provider) is handle
    emit(trace.get_tracer("app"), captured("genai_tool"))
    assert provider.force_flush()
    assert tags(exporter.get_finished_spans()[0])["loopguard.key.id"] == handle.key_id


def test_install_without_a_provider_creates_one_exporting_over_otlp(
    fresh_global: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_free_port()}")  # nothing listens
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    handle = install(key=KEY)
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider) and handle.provider is provider
    delegates = handle.processor._delegates  # noqa: SLF001
    assert [type(d) for d in delegates] == [BatchSpanProcessor]
    assert isinstance(delegates[0]._batch_processor._exporter, OTLPSpanExporter)  # noqa: SLF001
    assert install() is handle


def test_a_non_sdk_global_provider_is_a_clear_error(fresh_global: None) -> None:
    class VendorProvider(trace.TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
            return trace.NoOpTracer()

    trace.set_tracer_provider(VendorProvider())
    with pytest.raises(LoopguardError) as info:
        install(key=KEY)
    message = str(info.value)
    assert "VendorProvider" in message and "tracer_provider=" in message


@pytest.mark.parametrize("provider", [trace.NoOpTracerProvider(), trace.ProxyTracerProvider(), object()])
def test_a_non_sdk_provider_passed_in_is_a_clear_error(provider: Any) -> None:
    with pytest.raises(LoopguardError, match="TracerProvider"):
        install(tracer_provider=provider, key=KEY)


def test_processors_added_after_install_also_get_tagged_spans(stack: Stack) -> None:
    late = InMemorySpanExporter()
    stack.tp.add_span_processor(SimpleSpanProcessor(late))
    assert len(_guards(stack.tp)) == 1, "the late processor sits behind the guard, not beside it"
    with stack.tracer.start_as_current_span("agent"):
        emit_turn(stack.tracer, "oi_lc_tool_1")
    assert stack.tp.force_flush()
    early_tools = [s for s in stack.exporter.get_finished_spans() if s.name == "lookup_order"]
    late_tools = [s for s in late.get_finished_spans() if s.name == "lookup_order"]
    assert len(late.get_finished_spans()) == 3
    assert tags(late_tools[0]) == tags(early_tools[0]) != {}


def test_handle_reports_mode_and_a_stable_non_secret_key_id(stacks: Callable[..., Stack], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = stacks(), stacks(mode="enforce"), stacks(key="a-different-key-0123456789")
    assert (a.handle.mode, b.handle.mode) == ("observe", "enforce")  # type: ignore[union-attr]
    assert a.handle.key_id == b.handle.key_id != c.handle.key_id  # type: ignore[union-attr]
    assert KEY not in a.handle.key_id  # type: ignore[union-attr]
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY_ID", "kid-2026-01")
    d = stacks()
    assert d.handle.key_id == "kid-2026-01"  # type: ignore[union-attr]
    emit(d.tracer, captured("genai_tool"))
    assert tags(d.tool_spans()[0])["loopguard.key.id"] == "kid-2026-01"


def test_without_a_key_the_handle_says_the_key_is_ephemeral(stacks: Callable[..., Stack]) -> None:
    stack = stacks(key=None)
    assert stack.handle.key_id.startswith("ephemeral-")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "var,value",
    [
        ("OTEL_LOOPGUARD_QUEUE_SIZE", "lots"),
        ("OTEL_LOOPGUARD_MAX_RUNS", "1.5"),
        ("OTEL_LOOPGUARD_REDACT", "maybe"),
    ],
)
def test_an_invalid_variable_is_a_clear_error_naming_it(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ProcessorConfigError) as info:
        install(tracer_provider=TracerProvider(), key=KEY)
    assert var in str(info.value) and value in str(info.value)


def test_an_invalid_mode_is_refused_before_anything_changes(monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack]) -> None:
    stack = stacks(installed=False)
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "enforse")
    with pytest.raises(ProcessorConfigError, match="enforse"):
        install(tracer_provider=stack.tp, key=KEY)
    with pytest.raises(ProcessorConfigError, match="mode"):
        install(tracer_provider=stack.tp, key=KEY, mode="block")
    assert _guards(stack.tp) == [], "a refused install leaves the provider as it was"
    emit(stack.tracer, captured("genai_tool"))
    assert [s.name for s in stack.spans()] == ["execute_tool lookup_order"]


@pytest.mark.parametrize("var,value", [("OTEL_LOOPGUARD_MODE", "enforse"), ("OTEL_LOOPGUARD_QUEUE_SIZE", "0")])
def test_an_invalid_mode_or_size_variable_names_the_variable(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ProcessorConfigError) as info:
        install(tracer_provider=TracerProvider(), key=KEY)
    assert var in str(info.value)


@pytest.mark.parametrize("argument,value", [("redact", "false"), ("agent_scopes", 1), ("mode", True),
                                            ("run_id_attribute", 7)])
def test_an_install_argument_of_the_wrong_type_is_refused_not_taken_for_truthy(argument: str, value: object) -> None:
    with pytest.raises(ProcessorConfigError, match=argument):  # redact="false" would have turned redaction ON
        install(tracer_provider=TracerProvider(), key=KEY, **{argument: value})


def test_a_policy_path_object_is_accepted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "policy.yaml"
    policy.write_text("repeat:\n  warn_at: 4\n  stop_at: 6\n")
    handle = install(tracer_provider=TracerProvider(), key=KEY, policy=policy)
    assert handle.mode == "observe"


def test_arguments_beat_environment(monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack]) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "enforce")
    monkeypatch.setenv("OTEL_LOOPGUARD_RUN_ID_ATTRIBUTE", "session.id")
    stack = stacks(mode="observe", run_id_attribute="gen_ai.conversation.id")
    attrs = dict(captured("genai_tool")["attributes"], **{"session.id": "s-1", "gen_ai.conversation.id": "c-1"})
    emit(stack.tracer, captured("genai_tool"), attributes=attrs)
    t = tags(stack.tool_spans()[0])
    assert (t["loopguard.mode"], t["loopguard.run.id"]) == ("observe", "c-1")


def test_handle_shutdown_flushes_and_stops_the_worker(stack: Stack) -> None:
    with stack.tracer.start_as_current_span("agent"):
        for _ in range(3):
            emit_turn(stack.tracer, "genai_tool")
    stack.handle.shutdown()  # type: ignore[union-attr]
    assert len(stack.exporter.get_finished_spans()) == 7
    assert not stack.handle.processor._worker.is_alive()  # type: ignore[union-attr]  # noqa: SLF001
