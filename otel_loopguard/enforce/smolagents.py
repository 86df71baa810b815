"""The adapter for smolagents: the guard as a wrapper around each `Tool`.

    from otel_loopguard.enforce.smolagents import guard_agent

    guard = otel_loopguard.guard()
    agent = guard_agent(ToolCallingAgent(tools=[lookup_order, search_cases], model=model), guard)
    # CodeAgent too: the code it writes calls the wrappers

Every call of a wrapped tool asks the guard first (`LoopguardTool.__call__`, which both
ToolCallingAgent's JSON calls and CodeAgent's code reach). A denied call is answered with the
guard's message as the tool's output: the wrapped tool never runs (and opens no tool span). A
call that ran is recorded with its result (an exception as a failure, and re-raised, so
smolagents reports it to the model as it would); an enforced warn is added to a text result as
the nudge. Once the guard has stopped the run, every denial ends with seed 001's wrap-up
instruction (wrapper.py): the model's next request carries it, and it answers through
`final_answer`, the one way a smolagents agent ends a run (the agent's own tool, never
wrapped). `loop_guard` is recorded as the run's ending.

`guard_agent` wraps the agent's tools in place (before `run()`: a CodeAgent hands its tools to
its executor then) and gives each call the agent's step as its turn, so the calls of one model
response are siblings (parallel identical calls are not a repeat). `guard_tools(tools, guard)`
wraps tools before the agent is made, without turns. A managed agent is not a tool: guard its
own agent. Runs: `with guard.run(...)`, else the trace (the processor's default run id), else
the process-wide run "local" (docs/guard.md, "Runs").
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, TypeVar

from smolagents import Tool

from .guard import Guard
from .wrapper import GuardedCall

FINAL_ANSWER = "final_answer"  # the agent's own way to end a run: never denied
A = TypeVar("A")


class LoopguardTool(Tool):  # type: ignore[misc]  # smolagents ships no type hints for mypy here
    """`tool`, each call asked of `guard` first; the same name, description and inputs."""

    skip_forward_signature_validation = True  # forward() takes what the wrapped tool takes

    def __init__(self, tool: Tool, guard: Guard, turn: Optional[Callable[[str], Optional[int]]] = None):
        self.wrapped = tool
        self.guard = guard
        self.turn = turn  # run id -> the model response a call answers (the agent's step), when known
        self.name = tool.name
        self.description = tool.description
        self.inputs = tool.inputs
        self.output_type = tool.output_type
        self.output_schema = getattr(tool, "output_schema", None)
        super().__init__()
        self.is_initialized = True  # the wrapped tool sets itself up at its first call

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.wrapped.forward(*args, **kwargs)

    def __call__(self, *args: Any, sanitize_inputs_outputs: bool = False, **kwargs: Any) -> Any:
        call = GuardedCall(self.guard, self.name, self._arguments(args, kwargs), self.turn)
        if call.denied:
            return call.denial()
        try:
            result = self.wrapped(*args, sanitize_inputs_outputs=sanitize_inputs_outputs, **kwargs)
        except Exception as exc:
            call.failed(exc)
            raise
        return call.succeeded(result)

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by name, as the model gave them (one dict, or by keyword, or
        in the order of `inputs`)."""
        if len(args) == 1 and not kwargs and isinstance(args[0], dict) and all(k in self.inputs for k in args[0]):
            return dict(args[0])
        return {**dict(zip(self.inputs, args)), **kwargs}


def guard_tools(tools: Iterable[Tool], guard: Guard) -> list[Tool]:
    """Each tool wrapped (a LoopguardTool already wrapped is kept as it is), without turns."""
    return [t if isinstance(t, LoopguardTool) else LoopguardTool(t, guard) for t in tools]


def guard_agent(agent: A, guard: Guard) -> A:
    """The agent's tools wrapped in place, each call's turn its step; `final_answer` and
    managed agents are left as they are. Returns the agent."""
    tools: dict[str, Any] = agent.tools  # type: ignore[attr-defined]  # smolagents' public mapping
    for name, tool in list(tools.items()):
        if name != FINAL_ANSWER and not isinstance(tool, LoopguardTool):
            tools[name] = LoopguardTool(tool, guard, turn=lambda _run: getattr(agent, "step_number", None))
    return agent
