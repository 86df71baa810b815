"""An explicit run scope: `with guard.run("ticket-42"):` makes the calls inside one run,
whatever the trace. Without a trace and without a scope, every decorated call of the process
shares the run "local" (docs/guard.md, "Runs"): that default and its consequence are shown too.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from otel_loopguard.enforce import make_guard  # noqa: E402

from .agents_helpers import _clean_agents_env, stacks  # noqa: E402,F401 - fixtures are used by name
from .lc_helpers import _clean_lc_env, lc, lc_instrumented  # noqa: E402,F401 - fixtures are used by name

KEY = "run-scope-test-key-3Vb7Nw2Q"
DENIED = "Not executed: loop guard"


def _decorated(guard: Any, invoked: list) -> Any:
    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered", "order": order_id}

    return lookup_order


def test_without_a_trace_each_guard_run_block_is_its_own_run() -> None:
    guard, invoked = make_guard(key=KEY), []
    lookup = _decorated(guard, invoked)
    with guard.run("ticket-42"):
        first = [lookup("A12") for _ in range(6)]
        assert guard.stopped() is not None and guard.stopped("ticket-42") is not None
    with guard.run("ticket-43") as name:
        second = lookup("B7")
        assert name == "ticket-43" and guard.stopped() is None
    assert first[4].startswith(DENIED) and second == {"status": "delivered", "order": "B7"}
    assert invoked == ["A12"] * 4 + ["B7"]


def test_negative_control_without_a_trace_or_a_scope_one_stop_denies_every_later_call(
        caplog: pytest.LogCaptureFixture) -> None:
    """The documented default: the process-wide run "local", stopped once, stays stopped."""
    import otel_loopguard.enforce.decorator as decorator

    decorator._warned_local = False  # the warning is given once per process
    guard, invoked = make_guard(key=KEY), []
    lookup = _decorated(guard, invoked)
    with caplog.at_level("WARNING", logger="otel_loopguard"):
        for _ in range(5):
            lookup("A12")
        later = lookup("B7")  # another "ticket", hours later: same run
    assert later.startswith(DENIED) and invoked == ["A12"] * 4
    assert "shared by the whole process" in caplog.text and "guard.run" in caplog.text


@pytest.mark.parametrize("scoped", [True, False], ids=["scoped", "negative control: no scope"])
def test_a_scope_inside_one_trace_separates_langchain_invocations(lc: Any, scoped: bool) -> None:
    import contextlib

    from langchain_core.tools import tool

    from otel_loopguard.enforce.langchain import LoopGuardMiddleware

    from .lc_helpers import model, repeat, run_agent

    invoked: list = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "delivered", "order": order_id}

    guard = make_guard(key=KEY)
    middleware = LoopGuardMiddleware(guard)

    def scope(name: str) -> Any:
        return guard.run(name) if scoped else contextlib.nullcontext()

    with lc.provider.get_tracer("scope").start_as_current_span("worker batch"):  # one trace, two tickets
        with scope("ticket-42"):
            run_agent(model(repeat("lookup_order", {"order_id": "A12"}, 6) + ["stopped"]), [lookup_order], [middleware])
        with scope("ticket-43"):
            out = run_agent(model([[("lookup_order", {"order_id": "B7"})], "B7 delivered"]), [lookup_order], [middleware])
    if scoped:
        assert invoked == ["A12"] * 4 + ["B7"]
        assert out["messages"][-1].content == "B7 delivered" and "loopguard_stop" not in out
    else:
        assert invoked == ["A12"] * 4  # B7 denied: without a scope the trace's run was stopped


@pytest.mark.parametrize("scoped", [True, False])
def test_a_scope_separates_agents_sdk_runs_of_one_trace(stacks: Any, scoped: bool) -> None:
    import contextlib

    from agents import Agent, Runner, function_tool

    from .agents_helpers import ScriptedModel, repeat

    stack = stacks("openinference")
    invoked: list = []

    @function_tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order."""
        invoked.append(order_id)
        return {"order": order_id, "status": "delivered"}

    guard = make_guard(key=KEY)

    def ticket(name: str, script: list) -> Any:
        from otel_loopguard.enforce.openai_agents import guard_agent

        agent = guard_agent(guard, Agent(name="Order agent", tools=[lookup_order], model=ScriptedModel(script)))
        with guard.run(name) if scoped else contextlib.nullcontext():
            return asyncio.run(Runner.run(agent, "Where is my order?", max_turns=20))

    with stack.tracer.start_as_current_span("worker batch"):
        ticket("ticket-42", repeat(("lookup_order", {"order_id": "A12"}), 6) + ["stopped"])
        ticket("ticket-43", [[("lookup_order", {"order_id": "B7"})], "B7 delivered"])
    assert invoked == ["A12"] * 4 + (["B7"] if scoped else [])  # negative control: one trace, one run
