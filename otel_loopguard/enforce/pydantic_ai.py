"""The adapter for Pydantic AI: the guard as a wrapper toolset.

    from pydantic_ai import Agent, FunctionToolset
    from otel_loopguard.enforce.pydantic_ai import LoopguardToolset

    guard = otel_loopguard.guard()
    tools = FunctionToolset([lookup_order, search_cases])
    agent = Agent(model, toolsets=[LoopguardToolset(tools, guard=guard)])

Every call of the wrapped toolset asks the guard first (`call_tool`). A denied call is
answered with the guard's message as the tool's return value: the tool never runs. A call
that ran is recorded with its result (an exception, `ModelRetry` included, as a failure, and
re-raised); an enforced warn is added to the result as the nudge. Once the guard has stopped
the run, the next model request is seed 001's wrap-up: the toolset offers no tools and adds
the wrap-up instruction, and `loop_guard` is recorded as the run's ending (docs/guard.md,
"Wrap-up"). Calls of one model response share a turn (Pydantic AI's run step).

Tools registered on the agent itself (`@agent.tool`) are not in a toolset this wrapper can
hold: register them in a `FunctionToolset` to guard them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from pydantic_ai.toolsets import WrapperToolset

from ..bounded import BoundedSet
from .decorator import late_warning, nudge, record_decision, scoped_or_traced_run_id
from .guard import MAX_RUNS, WARN, WRAP_UP, Guard
from .termination import record_termination


@dataclass
class LoopguardToolset(WrapperToolset):  # type: ignore[misc,type-arg]  # generic in the app's deps type
    """The wrapped toolset's calls, each asked of `guard` before it runs."""

    guard: Guard = field(kw_only=True)
    # Runs whose wrap-up was asked; shared by the copies Pydantic AI makes for each run (replace()).
    _wrapped_up: BoundedSet = field(default_factory=lambda: BoundedSet(MAX_RUNS), kw_only=True, repr=False)

    async def get_tools(self, ctx: Any) -> dict[str, Any]:
        if self.guard.stopped(_run_id(ctx)) is not None:
            self._note_wrap_up(ctx)
            return {}  # the wrap-up turn: the model answers without tools
        tools: dict[str, Any] = await self.wrapped.get_tools(ctx)
        return tools

    async def get_instructions(self, ctx: Any) -> Any:
        own = await super().get_instructions(ctx)
        if self.guard.stopped(_run_id(ctx)) is None:
            return own
        return [*_listed(own), WRAP_UP]

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        run_id = _run_id(ctx)
        decision = self.guard.check(name, dict(tool_args), run_id=run_id, turn=ctx.run_step or None)
        record_decision(decision, name)  # Pydantic AI's execute_tool span: marked at its start
        if decision.denied:
            return decision.message
        try:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except Exception as exc:  # ModelRetry too: the model is told the call failed
            self.guard.record(decision, f"{type(exc).__name__}: {exc}", False, run_id=run_id)
            raise
        decision = late_warning(self.guard, decision, self.guard.record(decision, result, True, run_id=run_id), name)
        return nudge(result, decision.message) if decision.action == WARN and decision.enforced else result

    def _note_wrap_up(self, ctx: Any) -> None:
        if self._wrapped_up.add(_run_id(ctx)):
            record_termination("loop_guard")


def _listed(instructions: Any) -> Sequence[Any]:
    if instructions is None:
        return []
    if isinstance(instructions, (list, tuple)):
        return list(instructions)
    return [instructions]


def _run_id(ctx: Any) -> str:
    """`with guard.run(...)`, else the trace (the processor's default run id), else Pydantic
    AI's run id."""
    return scoped_or_traced_run_id() or f"pydantic-ai-{ctx.run_id}"
