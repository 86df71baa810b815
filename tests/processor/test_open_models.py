"""A call that starts inside a model span still open takes that model span's turn (open_models.py).

Google ADK's built-in spans end `generate_content <model>` only after the calls it asked for have
run, as their sibling, with every attribute set at the end. Before, in-process, the first batch's
calls had no turn (no model span had ended) and a call asked in turns 1 and 2 read as three
decisions: a repeat warning the audit and the receiver (which see the whole trace) did not give.
Here the spans are emitted as ADK emits them, on a real TracerProvider with install().
"""

from __future__ import annotations

import json
import threading
from typing import Any, Optional

from pathlib import Path

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.audit import audit
from otel_loopguard.otlp.json_format import request_to_json
from otel_loopguard.processor.open_models import MAX_OPEN_PER_TRACE, OpenModels

from .helpers import Stack, decisions, tags

PARALLEL = [["A-1", "B-2"], ["A-1", "A-1"]]  # adk_builtin__parallel's script: no repeat, one duplicate
MODEL_ATTRIBUTES = {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "scripted-model",
                    "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}


def _call(tracer: Any, order_id: str, content: bool) -> None:
    span = tracer.start_span("execute_tool lookup_order")  # ADK sets every attribute at the end
    span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"})
    if content:  # ADK records arguments and results only with content capture on
        span.set_attributes({"gen_ai.tool.call.arguments": json.dumps({"order_id": order_id}),
                             "gen_ai.tool.call.result": json.dumps({"order_id": order_id, "status": "shipped"})})
    span.end()


def _run(stack: Stack, script: list[list[str]], *, model_name: str = "generate_content scripted-model",
         enclosing: bool = True, as_parent: bool = False, content: bool = True) -> None:
    """An agent: per turn a model span and the calls it asked for. enclosing: the model span
    ends after its calls (ADK), else before they start; as_parent: the calls are its children."""
    tracer = stack.tracer
    with tracer.start_as_current_span("invoke_agent order_agent"):
        for batch in script + [[]]:
            model = tracer.start_span(model_name)
            if not enclosing:
                _end_model(model)
            ctx = trace.set_span_in_context(model) if as_parent else None
            for order_id in batch:
                if ctx is None:
                    _call(tracer, order_id, content)
                else:
                    token = otel_context.attach(ctx)
                    try:
                        _call(tracer, order_id, content)
                    finally:
                        otel_context.detach(token)
            if enclosing:
                _end_model(model)


def _end_model(model: Any) -> None:
    model.set_attributes(MODEL_ATTRIBUTES)
    model.end()


def _turns(stack: Stack) -> list[Optional[int]]:
    return [tags(s).get("loopguard.turn") for s in stack.tagged()]


def _kinds(stack: Stack) -> list[str]:
    return sorted(f"{d['loopguard.finding.kind']}/{d['loopguard.finding.severity']}"
                  for s in stack.tagged() for d in decisions(s))


def _audited(stack: Stack, tmp_path: Path) -> list[str]:
    """The audit of what the processor exported (its sequence, turns and digests)."""
    out = tmp_path / "export.otlp.json"
    out.write_text(json.dumps(request_to_json(encode_spans(stack.spans()))) + "\n", encoding="utf-8")
    return sorted(f"{f.kind}/{f.severity}" for r in audit([out]) for f in r.findings)


@pytest.mark.parametrize("content", [True, False], ids=["content", "content-off"])
def test_a_call_inside_an_open_model_span_takes_its_turn(stack: Stack, tmp_path: Path, content: bool) -> None:
    _run(stack, PARALLEL, content=content)
    assert _turns(stack) == [1, 1, 2, 2]
    assert [tags(s)["loopguard.seq"] for s in stack.tagged()] == [1, 2, 3, 4]
    assert not any(k.startswith("repeat/") for k in _kinds(stack)), _kinds(stack)
    audited = _audited(stack, tmp_path)  # one duplicated batch; both without arguments
    assert audited == ["parallel_duplicate/info"] * (1 if content else 2)


def test_negative_control_model_spans_ending_before_their_calls_keep_distinct_turns(stack: Stack) -> None:
    """The usual shape (the model span ends, then its calls run): turns as before, 1 and 2."""
    _run(stack, PARALLEL, enclosing=False)
    assert _turns(stack) == [1, 1, 2, 2]
    assert not any(k.startswith("repeat/") for k in _kinds(stack))


def test_negative_control_enclosed_turns_stay_distinct_and_a_real_repeat_is_found(stack: Stack) -> None:
    """One call per turn, each inside its own open model span: five turns, a repeat (the rule
    does not fold turns together)."""
    _run(stack, [["A-1"]] * 5)
    assert _turns(stack) == [1, 2, 3, 4, 5]
    assert any(k.startswith("repeat/") for k in _kinds(stack)), _kinds(stack)


def test_sequential_shape_repeats_are_numbered_as_before(stack: Stack) -> None:
    _run(stack, [["A-1"]] * 5, enclosing=False)
    assert _turns(stack) == [1, 2, 3, 4, 5]
    assert any(k.startswith("repeat/") for k in _kinds(stack))


def test_mutation_a_model_span_not_named_as_an_inference_gives_the_old_defect(stack: Stack, tmp_path: Path) -> None:
    """Without the name the conventions give an inference span, nothing says the span is a model
    span before it ends: the first batch has no turn, and without arguments (content off) the four
    calls read as three decisions of one action, a repeat."""
    _run(stack, PARALLEL, model_name="scripted model call", content=False)
    assert _turns(stack) == [None, None, 1, 1]
    assert "repeat/warn" in _audited(stack, tmp_path)


def test_a_model_span_that_is_its_calls_parent_bounds_no_turn(stack: Stack) -> None:
    """One model span around a whole run as its calls' parent (OpenInference's shape) is not a
    request before them (otlp/order.py): its calls keep the turns they had."""
    _run(stack, [["A-1"]] * 3, as_parent=True)
    assert _turns(stack) == [None, 1, 2]


def test_a_model_span_started_after_the_call_does_not_enclose_it() -> None:
    provider = TracerProvider()
    tracer = provider.get_tracer("t")
    models = OpenModels(max_traces=8)
    with tracer.start_as_current_span("invoke_agent a"):
        call = tracer.start_span("execute_tool x")
        model = tracer.start_span("chat m")
        models.started(model)
        call.end()
        assert not models.encloses(call)
        earlier = tracer.start_span("execute_tool y", start_time=(model.start_time or 0) + 1)
        earlier.end()
        assert models.encloses(earlier)
        models.ended(model)
        assert not models.encloses(earlier) and models.count == 0


@pytest.mark.parametrize("name, turns", [
    ("chat gpt-4o", [1, 1, 2, 2]), ("text_completion m", [1, 1, 2, 2]),  # the GenAI inference names
    ("chatbot", [None, None, 1, 1]), ("execute_tool chat", [None, None, 1, 1]),
    ("invoke_agent chat", [None, None, 1, 1]), ("generate_contents m", [None, None, 1, 1]),
])
def test_only_inference_names_open_a_turn(stack: Stack, name: str, turns: list[Optional[int]]) -> None:
    _run(stack, PARALLEL, model_name=name)
    assert _turns(stack) == turns


@pytest.mark.parametrize("name, turns", [
    # The operation alone, or a longer word: no model named after it, not an inference name.
    ("chat", [None, None, 1, 1]), ("generate_content", [None, None, 1, 1]), ("text_completion", [None, None, 1, 1]),
    ("chatty x", [None, None, 1, 1]), ("chat_x y", [None, None, 1, 1]), ("Chat m", [None, None, 1, 1]),
    (" chat m", [None, None, 1, 1]), ("chat\tm", [None, None, 1, 1]), ("", [None, None, 1, 1]),
    # The operation and a space open the name: whatever follows, even nothing, names a model.
    ("chat ", [1, 1, 2, 2]), ("generate_content x y", [1, 1, 2, 2]), ("text_completion  m", [1, 1, 2, 2]),
])
def test_names_on_the_edge_are_decided_by_the_operation_and_a_space(
        stack: Stack, name: str, turns: list[Optional[int]]) -> None:
    _run(stack, PARALLEL, model_name=name)
    assert _turns(stack) == turns


def test_memory_is_bounded_when_model_spans_never_end() -> None:
    tracer = TracerProvider().get_tracer("t")
    models = OpenModels(max_traces=16)
    for _ in range(100):  # a trace each, never ended
        models.started(tracer.start_span("chat m"))
    assert models.count <= 16
    with tracer.start_as_current_span("invoke_agent a"):
        for _ in range(3 * MAX_OPEN_PER_TRACE):  # one trace, never ended
            models.started(tracer.start_span("chat m"))
    assert models.count <= 16 + MAX_OPEN_PER_TRACE


def test_concurrent_runs_keep_their_own_turns(stacks: Any) -> None:
    """Each thread its own trace: one run's open model span never shifts another's calls."""
    stack = stacks()
    threads = [threading.Thread(target=_run, args=(stack, PARALLEL)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_run: dict[str, list[Any]] = {}
    for s in stack.tagged():
        by_run.setdefault(tags(s)["loopguard.run.id"], []).append(tags(s).get("loopguard.turn"))
    assert sorted(by_run.values()) == [[1, 1, 2, 2]] * 4
    assert not any(k.startswith("repeat/") for k in _kinds(stack))


def test_a_failing_record_of_open_model_spans_never_reaches_the_application(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenModels raising at a span's start or end: the app's spans still end and are exported,
    the calls exported (at start: the old numbering; at end: the span passed on untagged)."""
    def broken(self: OpenModels, span: Any) -> None:
        raise RuntimeError("open models exploded")

    monkeypatch.setattr(OpenModels, "started", broken)
    _run(stack, PARALLEL)
    assert _turns(stack) == [None, None, 1, 1]  # nothing noted: the old numbering, no crash
    monkeypatch.undo()
    monkeypatch.setattr(OpenModels, "ended", broken)
    _run(stack, PARALLEL)  # spans noted, closing them fails: the app still sees nothing
    assert len(stack.tool_spans()) == 8  # every call exported (the second run's untagged)
