"""The processor never raises into the application, never blocks it, and loses no span."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any, Callable

import pytest
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.processor.tagger import Tagger

from .helpers import HEX32, BlockedTagger, Stack, captured, emit, tags, timed

FIVE_MB = 5 * 1024 * 1024


def _deep_dict(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


# (attributes over a GenAI tool span, whether the span is still a tool span)
ODD: dict[str, tuple[dict[str, Any], bool]] = {
    "int payloads": ({"gen_ai.tool.call.arguments": 7, "gen_ai.tool.call.result": 8}, True),
    "list payloads": ({"gen_ai.tool.call.arguments": [1, 2, 3], "gen_ai.tool.call.result": ["a", "b"]}, True),
    "bool payloads": ({"gen_ai.tool.call.arguments": True, "gen_ai.tool.call.result": False}, True),
    "bytes payloads": ({"gen_ai.tool.call.arguments": b'{"order_id": "A-1"}', "gen_ai.tool.call.result": b"\xff\xfe\x00"}, True),
    "mapping payloads": ({"gen_ai.tool.call.arguments": {"order_id": "A-1"}, "gen_ai.tool.call.result": {"x": [1, {"y": 2}]}}, True),
    "deep mapping": ({"gen_ai.tool.call.arguments": _deep_dict(60)}, True),
    "5 MB strings": ({"gen_ai.tool.call.arguments": "x" * FIVE_MB, "gen_ai.tool.call.result": "y" * FIVE_MB}, True),
    "5 MB JSON": ({"gen_ai.tool.call.arguments": json.dumps({"blob": "v" * FIVE_MB})}, True),
    "deep JSON": ({"gen_ai.tool.call.arguments": "[" * 200_000 + "]" * 200_000,
                   "gen_ai.tool.call.result": '{"a":' * 100_000 + "1" + "}" * 100_000}, True),
    "NaN and infinities": ({"gen_ai.tool.call.arguments": math.nan, "gen_ai.tool.call.result": -math.inf}, True),
    "NaN in JSON": ({"gen_ai.tool.call.arguments": '{"a": NaN, "b": Infinity}', "gen_ai.tool.call.result": "[NaN]"}, True),
    "lone surrogates": ({"gen_ai.tool.call.arguments": "\ud800 lone", "gen_ai.tool.call.result": "\udfff"}, True),
    "empty strings": ({"gen_ai.tool.call.arguments": "", "gen_ai.tool.call.result": "", "gen_ai.tool.name": ""}, True),
    "int tool name": ({"gen_ai.tool.name": 42}, True),
    "list tool name": ({"gen_ai.tool.name": ["a", "b"]}, True),
    "broken LangChain wrapper": ({"gen_ai.tool.call.arguments": '{"input_str": 1, "inputs": [1, 2]}',
                                  "gen_ai.tool.call.result": '{"tool_call_id": 5, "content": {"a": NaN}, "status": ["error"]}'}, True),
    "broken ToolMessage": ({"gen_ai.tool.call.result": '{"type": "tool", "data": {"tool_call_id": null, "status": {"x": 1}}}'}, True),
    "weird outcome tag": ({"loopguard.outcome": 5}, True),
    "list marker": ({"gen_ai.operation.name": ["execute_tool"]}, False),
    "int marker": ({"gen_ai.operation.name": 1}, False),
}


@pytest.mark.parametrize("name", list(ODD))
def test_odd_attribute_values_never_reach_the_app_and_spans_still_export(
    stacks: Callable[..., Stack], caplog: pytest.LogCaptureFixture, name: str
) -> None:
    stack = stacks(run_id_attribute="gen_ai.conversation.id")
    extra, is_tool = ODD[name]
    attrs = dict(captured("genai_tool")["attributes"], **extra)
    # The run-id attribute gets odd values too: a mixed list, a mapping, or a plain string.
    attrs["gen_ai.conversation.id"] = ["odd", 1] if "list" in name else {"odd": 1} if "mapping" in name else "conv"
    with stack.tracer.start_as_current_span("agent"):
        _, seconds = timed(lambda: emit(stack.tracer, {"name": f"odd {name}"}, attributes=attrs))
        emit(stack.tracer, captured("genai_tool"))  # the worker survived: the next call is tagged as usual
    assert seconds < 0.5, "the application thread does a few lookups, never the fingerprinting"
    spans = {s.name: s for s in stack.spans()}
    odd, normal = spans[f"odd {name}"], spans["execute_tool lookup_order"]
    assert HEX32.match(tags(normal)["loopguard.args.digest"])
    if is_tool:
        assert HEX32.match(tags(odd)["loopguard.args.digest"]) and tags(odd)["loopguard.outcome"] in ("ok", "error")
        assert isinstance(tags(odd)["loopguard.run.id"], str) and tags(odd)["loopguard.seq"] >= 1
    else:
        assert tags(odd) == {}
    assert "otel-loopguard: error" not in caplog.text


def test_an_exception_in_the_tagger_passes_spans_on_untagged_and_logs_a_few_tracebacks(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="otel_loopguard")
    original = Tagger.tag
    failing = {"on": True}

    def tag(self: Tagger, span: Any) -> Any:
        if failing["on"]:
            raise RuntimeError("tagger exploded")
        return original(self, span)

    monkeypatch.setattr(Tagger, "tag", tag)
    with stack.tracer.start_as_current_span("agent"):
        for _ in range(20):
            emit(stack.tracer, captured("genai_tool"))  # the app sees nothing
    spans = stack.spans()
    tools = [s for s in spans if s.name == "execute_tool lookup_order"]
    assert len(tools) == 20 and all(tags(s) == {} for s in tools)
    assert tools[0].attributes["gen_ai.tool.call.arguments"] == '{"order_id": "A-1"}', "exported as the app made it"
    tracebacks = [r for r in caplog.records if r.exc_info and "tagger exploded" in str(r.exc_info[1])]
    assert 1 <= len(tracebacks) <= 5, "a broken span must not flood the application's logs"
    failing["on"] = False
    emit(stack.tracer, captured("genai_tool"))
    assert HEX32.match(tags(stack.tool_spans()[-1])["loopguard.args.digest"]), "tagging recovers"


def test_a_failing_exporter_processor_does_not_stop_the_others(stacks: Callable[..., Stack]) -> None:
    class Broken(SpanProcessor):
        def on_end(self, span: Any) -> None:
            raise ValueError("downstream broke")

    stack = stacks(installed=False)
    stack.tp.add_span_processor(Broken())
    second = InMemorySpanExporter()
    stack.tp.add_span_processor(SimpleSpanProcessor(second))
    from otel_loopguard.processor import install

    install(tracer_provider=stack.tp, key="k" * 20)
    with stack.tracer.start_as_current_span("agent"):
        emit(stack.tracer, captured("genai_tool"))
    assert stack.tp.force_flush()
    for exporter in (stack.exporter, second):
        assert {s.name for s in exporter.get_finished_spans()} == {"agent", "execute_tool lookup_order"}
        assert [tags(s)["loopguard.seq"] for s in exporter.get_finished_spans() if s.name.startswith("execute")] == [1]


def test_a_failing_processor_on_start_does_not_reach_the_app(stacks: Callable[..., Stack]) -> None:
    class Broken(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            raise ValueError("on_start broke")

    stack = stacks(installed=False)
    stack.tp.add_span_processor(Broken())
    from otel_loopguard.processor import install

    install(tracer_provider=stack.tp, key="k" * 20)
    emit(stack.tracer, captured("genai_tool"))  # raises ValueError into the application today


def test_a_failing_processor_flush_or_shutdown_does_not_reach_the_app_nor_spare_the_others(
    stacks: Callable[..., Stack], caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(SpanProcessor):
        def force_flush(self, timeout_millis: int = 30000) -> bool:
            raise RuntimeError("flush broke")

        def shutdown(self) -> None:
            raise RuntimeError("shutdown broke")

    stack = stacks(installed=False)
    stack.tp.add_span_processor(Broken())
    from otel_loopguard.processor import install

    install(tracer_provider=stack.tp, key="k" * 20)
    emit(stack.tracer, captured("genai_tool"))
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        assert stack.tp.force_flush() is False  # reported as a failed flush, not raised
        assert [s.name for s in stack.exporter.get_finished_spans()] == ["execute_tool lookup_order"]
        stack.tp.shutdown()
    assert stack.exporter._stopped  # noqa: SLF001 - the processor after the broken one was shut down too
    assert "failed to flush" in caplog.text and "failed to shut down" in caplog.text


def test_a_full_queue_passes_spans_on_untagged_without_blocking_the_app(
    monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack]
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_QUEUE_SIZE", "1")
    blocked = BlockedTagger(monkeypatch, safety_seconds=10)
    stack = stacks()
    processor = stack.handle.processor  # type: ignore[union-attr]
    tracer = stack.tracer
    try:
        with tracer.start_as_current_span("agent"):
            emit(tracer, {"name": "call 1"}, attributes=captured("genai_tool")["attributes"])
            assert blocked.started.wait(5), "the worker is inside the tagger"
            emit(tracer, {"name": "call 2"}, attributes=captured("genai_tool")["attributes"])  # waits in the queue
            _, seconds = timed(lambda: emit(tracer, {"name": "call 3"}, attributes=captured("genai_tool")["attributes"]))
            _, plain_seconds = timed(lambda: emit(tracer, {"name": "plain"}, attributes={"http.method": "GET"}))
        assert seconds < 0.2 and plain_seconds < 0.2, "the worker is blocked for up to 10 s; the app never waits"
        assert processor.passed_untagged == 1
        untagged_now = [s.name for s in stack.exporter.get_finished_spans()]
        assert "call 3" in untagged_now and "plain" in untagged_now, "passed on at once"
    finally:
        blocked.release.set()
    spans = {s.name: s for s in stack.spans()}
    assert set(spans) == {"agent", "call 1", "call 2", "call 3", "plain"}
    assert (tags(spans["call 1"])["loopguard.seq"], tags(spans["call 2"])["loopguard.seq"]) == (1, 2)
    assert tags(spans["call 3"]) == {}


def _slow_tagger(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    original = Tagger.tag

    def tag(self: Tagger, span: Any) -> Any:
        time.sleep(seconds)
        return original(self, span)

    monkeypatch.setattr(Tagger, "tag", tag)


@pytest.mark.parametrize("finish", ["force_flush", "handle.shutdown", "provider.shutdown"])
def test_flush_and_shutdown_deliver_everything_queued(
    monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack], finish: str
) -> None:
    _slow_tagger(monkeypatch, 0.02)
    stack = stacks(batch=True)
    tracer = stack.tracer

    def run() -> None:
        with tracer.start_as_current_span("agent"):
            for i in range(15):
                attrs = dict(captured("genai_tool")["attributes"], **{"gen_ai.tool.call.arguments": json.dumps({"i": i})})
                emit(tracer, captured("genai_tool"), attributes=attrs)

    _, seconds = timed(run)
    assert seconds < 15 * 0.02 / 2, "the app does not wait for the tagging"
    if finish == "force_flush":
        assert stack.tp.force_flush(10_000)
    elif finish == "handle.shutdown":
        stack.handle.shutdown()  # type: ignore[union-attr]
    else:
        stack.tp.shutdown()
    spans = stack.exporter.get_finished_spans()
    tools = sorted((s for s in spans if s.name.startswith("execute")), key=lambda s: s.start_time)
    assert len(spans) == 16 and [tags(s)["loopguard.seq"] for s in tools] == list(range(1, 16))
    if finish != "force_flush":
        assert not stack.handle.processor._worker.is_alive()  # type: ignore[union-attr]
        emit(tracer, captured("genai_tool"))  # after shutdown: neither raises nor hangs
        stack.handle.shutdown()  # type: ignore[union-attr]  # twice is fine


def test_many_application_threads_each_get_their_own_contiguous_run(stack: Stack) -> None:
    errors: list[BaseException] = []

    def agent(n: int) -> None:
        try:
            with stack.tracer.start_as_current_span(f"agent {n}"):
                for i in range(25):
                    emit(stack.tracer, captured("genai_chat"))
                    attrs = dict(captured("genai_tool")["attributes"], **{"gen_ai.tool.call.arguments": json.dumps({"n": n, "i": i})})
                    emit(stack.tracer, captured("genai_tool"), attributes=attrs)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    runs: dict[str, list[tuple[int, int]]] = {}
    for s in stack.tool_spans():
        runs.setdefault(tags(s)["loopguard.run.id"], []).append((tags(s)["loopguard.seq"], tags(s)["loopguard.turn"]))
    assert len(runs) == 8
    assert all(sorted(v) == [(i, i) for i in range(1, 26)] for v in runs.values())


def test_max_runs_bounds_the_state_kept(monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack]) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_MAX_RUNS", "3")
    stack = stacks()
    for _ in range(20):
        with stack.tracer.start_as_current_span("agent"):
            emit(stack.tracer, captured("genai_tool"))
    assert len(stack.tool_spans()) == 20
    assert len(stack.handle.processor._tagger._runs) <= 3  # type: ignore[union-attr]
