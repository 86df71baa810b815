"""LoopGuardMiddleware's own contract, driven directly and through an untraced agent.

How it numbers decisions, which run a call belongs to, what it does with Command
results and content blocks, tools that are observed only, and interrupts.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Optional

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain.agents.middleware.types import ToolCallRequest  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.errors import GraphInterrupt  # noqa: E402
from langgraph.types import Command  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from otel_loopguard.enforce.langchain import LoopGuardMiddleware  # noqa: E402

from .lc_helpers import _clean_lc_env, guard, model, repeat, run_agent  # noqa: E402,F401

DENIED = "Not executed: loop guard"
A12 = {"order_id": "A12"}


def _request(message: AIMessage, index: int) -> ToolCallRequest:
    call = message.tool_calls[index]
    return ToolCallRequest(tool_call=call, tool=None, state={"messages": [message]}, runtime=None)


def _turn(turn: int, n: int = 1, args: Optional[dict] = None, name: str = "lookup_order") -> AIMessage:
    calls = [{"name": name, "args": dict(args or A12), "id": f"call_{turn}_{j}", "type": "tool_call"}
             for j in range(n)]
    return AIMessage(content="", tool_calls=calls, id=f"msg-{turn}")


def _handler(invoked: list, content: Any = '{"status": "delivered"}') -> Callable[[ToolCallRequest], ToolMessage]:
    def run(request: ToolCallRequest) -> ToolMessage:
        invoked.append(request.tool_call["id"])
        return ToolMessage(content=content, tool_call_id=request.tool_call["id"], name="lookup_order")

    return run


def test_it_is_agent_middleware_that_wraps_tool_calls_sync_and_async() -> None:
    middleware = LoopGuardMiddleware(guard())
    assert isinstance(middleware, AgentMiddleware)
    # create_agent routes tool calls through a middleware only when it overrides these.
    assert type(middleware).wrap_tool_call is not AgentMiddleware.wrap_tool_call
    assert type(middleware).awrap_tool_call is not AgentMiddleware.awrap_tool_call


def test_siblings_of_one_message_are_one_decision_even_when_checked_one_by_one() -> None:
    middleware, invoked = LoopGuardMiddleware(guard()), []
    parallel = _turn(1, n=6)  # one model message asking for the same call six times
    results = [middleware.wrap_tool_call(_request(parallel, j), _handler(invoked)) for j in range(6)]
    assert len(invoked) == 6 and not any(DENIED in r.content for r in results)

    # The same six calls from six model messages are six decisions: the 5th is denied.
    middleware, invoked = LoopGuardMiddleware(guard()), []
    results = [middleware.wrap_tool_call(_request(_turn(t), 0), _handler(invoked)) for t in range(1, 7)]
    assert len(invoked) == 4
    assert results[4].content.startswith(DENIED) and results[4].tool_call_id == "call_5_0"
    assert results[4].status == "error" and results[4].name == "lookup_order"


def test_a_message_without_an_id_is_told_apart_by_its_tool_call_ids() -> None:
    middleware, invoked = LoopGuardMiddleware(guard()), []
    for t in range(1, 7):
        message = _turn(t)
        message.id = None
        middleware.wrap_tool_call(_request(message, 0), _handler(invoked))
    assert len(invoked) == 4


def test_the_nudge_is_appended_to_content_blocks() -> None:
    middleware, invoked = LoopGuardMiddleware(guard()), []
    blocks = [{"type": "text", "text": "delivered"}]
    results = [middleware.wrap_tool_call(_request(_turn(t), 0), _handler(invoked, blocks)) for t in (1, 2, 3)]
    assert results[1].content == blocks
    assert results[2].content[0] == blocks[0] and len(results[2].content) == 2
    assert results[2].content[1]["type"] == "text" and results[2].content[1]["text"].startswith("[loop guard]")


def test_a_command_result_is_recorded_and_nudged_in_place() -> None:
    middleware, invoked = LoopGuardMiddleware(guard()), []

    def command(request: ToolCallRequest) -> Command:
        invoked.append(request.tool_call["id"])
        message = ToolMessage(content="delivered", tool_call_id=request.tool_call["id"], name="lookup_order")
        return Command(update={"messages": [message], "order_status": "delivered"})

    results = [middleware.wrap_tool_call(_request(_turn(t), 0), command) for t in range(1, 6)]
    assert len(invoked) == 4  # the Command's ToolMessage content is what repeats
    third = results[2]
    assert isinstance(third, Command) and third.update["order_status"] == "delivered"
    (message,) = third.update["messages"]
    assert message.content.startswith("delivered\n\n[loop guard]") and message.tool_call_id == "call_3_0"
    assert isinstance(results[4], ToolMessage) and results[4].content.startswith(DENIED)


def test_async_hook_denies_without_awaiting_the_tool() -> None:
    import asyncio

    middleware, invoked = LoopGuardMiddleware(guard()), []

    async def handler(request: ToolCallRequest) -> ToolMessage:
        invoked.append(request.tool_call["id"])
        return ToolMessage(content="same", tool_call_id=request.tool_call["id"])

    async def agent() -> list:
        return [await middleware.awrap_tool_call(_request(_turn(t), 0), handler) for t in range(1, 7)]

    results = asyncio.run(agent())
    assert len(invoked) == 4 and results[4].content.startswith(DENIED)


def test_decisions_are_events_on_the_current_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    middleware, invoked = LoopGuardMiddleware(guard()), []
    with provider.get_tracer("t").start_as_current_span("invoke_agent") as root:
        for t in range(1, 6):
            middleware.wrap_tool_call(_request(_turn(t), 0), _handler(invoked))
    (span,) = exporter.get_finished_spans()
    verdicts = [e.attributes["loopguard.decision"] for e in span.events if e.name == "loopguard.decision"]
    assert verdicts == ["warn", "warn", "deny"]
    assert span.context.trace_id == root.get_span_context().trace_id
    provider.shutdown()


def test_a_tool_that_is_not_enforced_runs_and_is_reported_as_would_block(tmp_path: Any) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    middleware = LoopGuardMiddleware(guard(tmp_path, "tools: {lookup_order: {enforce: false}}\n"))
    invoked: list = []
    with provider.get_tracer("t").start_as_current_span("invoke_agent"):
        results = [middleware.wrap_tool_call(_request(_turn(t), 0), _handler(invoked)) for t in range(1, 7)]
    assert len(invoked) == 6 and not any(DENIED in r.content for r in results)
    assert not any("[loop guard]" in r.content for r in results)  # observe only: the model reads the tool's result
    (span,) = exporter.get_finished_spans()
    verdicts = [e.attributes["loopguard.decision"] for e in span.events]
    assert "would_block" in verdicts and "deny" not in verdicts
    provider.shutdown()


def test_an_interrupt_is_not_a_finished_call() -> None:
    middleware, invoked = LoopGuardMiddleware(guard()), []

    def interrupted(request: ToolCallRequest) -> ToolMessage:
        raise GraphInterrupt(())

    for t in range(1, 7):
        with pytest.raises(GraphInterrupt):
            middleware.wrap_tool_call(_request(_turn(t), 0), interrupted)
    result = middleware.wrap_tool_call(_request(_turn(7), 0), _handler(invoked))
    assert invoked == ["call_7_0"] and DENIED not in result.content


def test_an_exception_is_recorded_as_a_failed_call_and_raised() -> None:
    middleware = LoopGuardMiddleware(guard())

    def failing(request: ToolCallRequest) -> ToolMessage:
        raise RuntimeError("down")

    for t in range(1, 5):
        with pytest.raises(RuntimeError):
            middleware.wrap_tool_call(_request(_turn(t, args={"order_id": f"A{t}"}), 0), failing)
    result = middleware.wrap_tool_call(_request(_turn(5, args={"order_id": "A5"}), 0), failing)
    assert result.content.startswith(DENIED) and "4 decisions in a row ended in failed tool calls" in result.content


def test_run_id_can_be_chosen() -> None:
    runs = iter(["conversation-1"] * 4 + ["conversation-2"] * 4)
    middleware, invoked = LoopGuardMiddleware(guard(), run_id=lambda request: next(runs)), []
    results = [middleware.wrap_tool_call(_request(_turn(t), 0), _handler(invoked)) for t in range(1, 9)]
    assert len(invoked) == 8 and not any(DENIED in r.content for r in results)


REFUND_POLICY = "tools: {issue_refund: {idempotency_key: key}}\n"


def _refund(turn: int, key: str) -> ToolCallRequest:
    return _request(_turn(turn, args={"order_id": "A12", "amount": 10, "key": key}, name="issue_refund"), 0)


def test_a_retry_with_the_same_idempotency_key_does_not_stop_the_run(tmp_path: Any) -> None:
    # Guard.record() must keep the call's arguments: recorded without them, a write lost its
    # idempotency key, so a safe retry stopped the run and a new key was never matched.
    middleware, invoked = LoopGuardMiddleware(guard(tmp_path, REFUND_POLICY)), []
    middleware.wrap_tool_call(_refund(1, "k1"), _handler(invoked, "refunded"))
    middleware.wrap_tool_call(_refund(2, "k1"), _handler(invoked, "refunded"))  # a safe retry
    after = middleware.wrap_tool_call(_request(_turn(3, args={"order_id": "B7"}), 0), _handler(invoked))
    assert len(invoked) == 3 and DENIED not in after.content


def test_the_same_write_with_a_new_idempotency_key_is_denied(tmp_path: Any) -> None:
    middleware, invoked = LoopGuardMiddleware(guard(tmp_path, REFUND_POLICY)), []
    middleware.wrap_tool_call(_refund(1, "k1"), _handler(invoked, "refunded"))
    second = middleware.wrap_tool_call(_refund(2, "k2"), _handler(invoked, "refunded"))
    assert len(invoked) == 1 and second.content.startswith(DENIED)


def _lookup(invoked: list) -> Any:
    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "delivered"}

    return lookup_order


def test_untraced_invocations_are_separate_runs_by_their_langgraph_run_id() -> None:
    middleware = LoopGuardMiddleware(guard())
    counts = []
    for _ in range(2):
        invoked: list = []
        run_agent(model(repeat("lookup_order", A12, 6) + ["x"]), [_lookup(invoked)], [middleware],
                  config={"run_id": uuid.uuid4()})
        counts.append(len(invoked))
    assert counts == [4, 4]


def test_untraced_invocations_without_a_run_id_are_separate_runs_by_their_user_message() -> None:
    """No trace, no run_id, no thread_id: each invocation is its own run, so a run stopped in
    one invocation does not deny every later call of the process."""
    middleware = LoopGuardMiddleware(guard())
    counts = []
    for _ in range(2):
        invoked: list = []
        run_agent(model(repeat("lookup_order", A12, 6) + ["x"]), [_lookup(invoked)], [middleware])
        counts.append(len(invoked))
    assert counts == [4, 4]


def test_middleware_that_rewrites_the_history_mid_invocation_does_not_reset_the_run() -> None:
    """SummarizationMiddleware replaces old messages with a new HumanMessage (the summary)
    during a long loop: the run (no trace) must stay the invocation, or the loop starts over."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import HumanMessage

    invoked: list = []
    summarise = SummarizationMiddleware(model=model(["summary of the talk"] * 50), trigger=("messages", 10),
                                        keep=("messages", 4))
    agent = create_agent(model(repeat("lookup_order", A12, 30) + ["final"]), tools=[_lookup(invoked)],
                         middleware=[LoopGuardMiddleware(guard()), summarise], system_prompt="Help.")
    agent.invoke({"messages": [HumanMessage("Where is order A12?")]}, {"recursion_limit": 200})
    assert invoked == ["A12"] * 4  # stopped at the 5th, summaries or not


def test_a_stop_in_one_turn_of_a_thread_does_not_deny_the_next_turn() -> None:
    """With a checkpointer and a thread_id (no trace), the next user turn of the same thread
    starts a new run: a loop stopped in turn 1 must not deny turn 2's first call."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    invoked: list = []
    agent = create_agent(model(repeat("lookup_order", A12, 6) + ["x"] + [[("lookup_order", {"order_id": "B7"})], "y"]),
                         tools=[_lookup(invoked)], middleware=[LoopGuardMiddleware(guard())],
                         checkpointer=InMemorySaver(), name="order_agent")
    config = {"configurable": {"thread_id": "conversation-1"}, "recursion_limit": 100}
    agent.invoke({"messages": [HumanMessage("Where is order A12?")]}, config)
    assert invoked == ["A12"] * 4  # turn 1 looped and was stopped
    agent.invoke({"messages": [HumanMessage("And order B7?")]}, config)
    assert invoked[4:] == ["B7"]  # turn 2 ran its call
