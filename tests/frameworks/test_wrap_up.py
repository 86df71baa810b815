"""Seed 001's graceful wrap-up on each adapter: once the guard stops a run, one tool-free model
turn answers, that answer is returned as the partial result, and `loop_guard` is recorded as
the run's ending. Scripted models, real frameworks; docs/guard.md, "Wrap-up"."""

from __future__ import annotations

from typing import Any

import pytest

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.enforce import WRAP_UP, make_guard

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from .agents_helpers import _clean_agents_env, stacks  # noqa: E402,F401 - fixtures are used by name
from .lc_helpers import _clean_lc_env, lc, lc_instrumented  # noqa: E402,F401 - fixtures are used by name

KEY = "wrap-up-test-key-5Rt8Yq1Lm"
SUMMARY = "Summary: order A12 was delivered; the lookup kept returning the same status."


def _termination(spans: Any) -> list:
    return [s.attributes["loopguard.termination_reason"] for s in spans
            if "loopguard.termination_reason" in (s.attributes or {})]


# -- LangChain v1 create_agent -----------------------------------------------------------------

def _lc_run(lc: Any, times: int, *, invoke: str = "sync") -> tuple[dict, list, list, Any]:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    from otel_loopguard.enforce.langchain import LoopGuardMiddleware

    from .lc_helpers import ScriptedChatModel, repeat, run_agent

    class WrapUpAware(ScriptedChatModel):
        """Follows the wrap-up instruction, as a real model told to stop would."""

        def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            last = messages[-1]
            if isinstance(last, HumanMessage) and last.content == WRAP_UP:
                self.seen.append(list(messages))
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=SUMMARY, id="wrap"))])
            return super()._generate(messages, stop, run_manager, **kw)

    class SeeTools(AgentMiddleware):  # inside the guard: the tools each model request offers
        def __init__(self) -> None:
            super().__init__()
            self.offered: list = []

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            self.offered.append(len(request.tools))
            return handler(request)

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            self.offered.append(len(request.tools))
            return await handler(request)

    invoked: list = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "delivered", "order": order_id}

    chat = WrapUpAware(script=repeat("lookup_order", {"order_id": "A12"}, times) + ["All done: delivered."], seen=[])
    see = SeeTools()
    guard = make_guard(key=KEY)
    with lc.provider.get_tracer("wrap-up").start_as_current_span("invoke_agent support"):
        out = run_agent(chat, [lookup_order], [LoopGuardMiddleware(guard), see], invoke=invoke)
    return out, invoked, see.offered, lc.spans()


@pytest.mark.parametrize("invoke", ["sync", "async"])
def test_langchain_wraps_up_with_one_tool_free_turn(lc: Any, invoke: str) -> None:
    out, invoked, offered, spans = _lc_run(lc, 8, invoke=invoke)
    assert invoked == ["A12"] * 4  # the 5th call was denied: the run is stopped
    assert out["messages"][-1].content == SUMMARY  # the partial result is the wrap-up's answer
    assert out["loopguard_stop"]["kind"] == "repeat"  # how the application learns it stopped
    assert offered == [1] * 5 + [0]  # five turns with the tool, then one without any
    assert _termination(spans) == ["loop_guard"]


def test_negative_control_langchain_a_run_that_finishes_is_not_wrapped_up(lc: Any) -> None:
    out, invoked, offered, spans = _lc_run(lc, 2)
    assert invoked == ["A12"] * 2 and out["messages"][-1].content == "All done: delivered."
    assert "loopguard_stop" not in out and 0 not in offered
    assert _termination(spans) == []


# -- the plain decorator: the application owns the loop ------------------------------------------

def _plain_agent(turns: int) -> tuple[str, str, list, list, Any]:
    """Seed 001's run_agent loop with a scripted model: tools by the decorator, the wrap-up by
    guard.wrap_up() once guard.stopped() says so."""
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard, invoked, tool_free = make_guard(key=KEY), [], []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered"}

    def model(messages: list, allow_tools: bool) -> str | None:
        if not allow_tools:
            tool_free.append(messages[-1])
            return SUMMARY
        return None if sum(1 for m in messages if m[0] == "tool") < turns else "All done."

    messages: list = [("user", "Where is order A12?")]
    with provider.get_tracer("t").start_as_current_span("invoke_agent support"):
        while True:
            answer = model(messages, allow_tools=True)
            if answer is not None:
                status, text = "done", answer
                break
            messages.append(("tool", lookup_order("A12")))
            stop = guard.stopped()
            if stop is not None:
                text = guard.wrap_up(lambda prompt: model([*messages, ("user", prompt)], allow_tools=False))
                status = f"stopped: {stop.kind}"
                break
    return status, text, invoked, tool_free, exporter.get_finished_spans()


def test_the_decorator_wraps_up_with_one_tool_free_turn() -> None:
    status, text, invoked, tool_free, spans = _plain_agent(8)
    assert (status, text) == ("stopped: repeat", SUMMARY)
    assert len(invoked) == 4 and tool_free == [("user", WRAP_UP)]
    assert _termination(spans) == ["loop_guard"]


def test_negative_control_the_decorator_run_that_finishes_is_not_stopped() -> None:
    status, text, invoked, tool_free, spans = _plain_agent(2)
    assert (status, text) == ("done", "All done.") and tool_free == [] and _termination(spans) == []


# -- the OpenAI Agents SDK: run_guarded ------------------------------------------------------------

def _agents_run(turns: int, stacks: Any) -> tuple[Any, list, list, Any]:
    import asyncio

    from agents import Agent, RunConfig, function_tool

    from otel_loopguard.enforce.openai_agents import run_guarded

    from .agents_helpers import ScriptedModel, repeat

    class WrapUpAware(ScriptedModel):
        """Answers the wrap-up when tools are disabled, as a real model must; keeps each
        request's tool_choice."""

        choices: list = []

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, *a: Any, **k: Any) -> Any:
            self.choices.append(model_settings.tool_choice)
            if model_settings.tool_choice == "none":
                self.script.insert(len(self.inputs), SUMMARY)
            return await super().get_response(system_instructions, input, model_settings, *a, **k)

    stack = stacks("openinference")
    invoked: list = []

    @function_tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order."""
        invoked.append(order_id)
        return {"order": order_id, "status": "delivered"}

    model = WrapUpAware(repeat(("lookup_order", {"order_id": "A12"}), turns) + ["All done: delivered."])
    model.choices = []
    agent = Agent(name="Order agent", instructions="Help with orders.", tools=[lookup_order], model=model)
    with stack.tracer.start_as_current_span("invoke_agent support"):
        out = asyncio.run(run_guarded(make_guard(key=KEY), agent, "Where is order A12?", max_turns=40,
                                      run_config=RunConfig(workflow_name="wrap-up")))
    return out, invoked, model.choices, stack.spans()


def test_the_agents_sdk_wraps_up_with_one_tool_free_turn(stacks: Any) -> None:
    out, invoked, choices, spans = _agents_run(8, stacks)
    assert invoked == ["A12"] * 4
    assert out.final_output == SUMMARY and out.stopped is not None and out.stopped.kind == "repeat"
    assert choices == [None] * 5 + ["none"]  # five turns with tools, the 6th with tools disabled
    assert _termination(spans) == ["loop_guard"]


def test_negative_control_the_agents_sdk_run_that_finishes_is_not_wrapped_up(stacks: Any) -> None:
    out, invoked, choices, spans = _agents_run(2, stacks)
    assert out.final_output == "All done: delivered." and out.stopped is None
    assert "none" not in choices and _termination(spans) == []


def test_the_agents_sdk_wrap_up_turn_cannot_run_a_tool_even_without_a_trace() -> None:
    """A model that calls a tool in the tool-free turn anyway: the call is judged in the same
    run (stopped), so it is denied, not run; no partial result is returned."""
    import asyncio

    from agents import Agent, function_tool, set_trace_processors

    from otel_loopguard.enforce.openai_agents import run_guarded

    from .agents_helpers import ScriptedModel, repeat

    set_trace_processors([])  # no tracing at all: the run is the Runner.run
    invoked: list = []

    @function_tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order."""
        invoked.append(order_id)
        return {"order": order_id, "status": "delivered"}

    model = ScriptedModel(repeat(("lookup_order", {"order_id": "A12"}), 6))  # the 6th request is the wrap-up
    agent = Agent(name="Order agent", tools=[lookup_order], model=model)
    out = asyncio.run(run_guarded(make_guard(key=KEY), agent, "Where is order A12?", max_turns=40))
    assert invoked == ["A12"] * 4  # the wrap-up's call was denied too
    assert out.final_output is None and out.stopped is not None and out.stopped.kind == "repeat"
