"""The adapter for smolagents: the guard as a wrapper around each `Tool`.

    from otel_loopguard.enforce.smolagents import guard_tools

    guard = otel_loopguard.guard()
    agent = ToolCallingAgent(tools=guard_tools([lookup_order, search_cases], guard), model=model)
    # CodeAgent too: the code it writes calls the wrappers

Every call of a wrapped tool asks the guard first (`LoopguardTool.__call__`, which both
ToolCallingAgent's JSON calls and CodeAgent's code reach). A denied call is answered with the
guard's message as the tool's output: the wrapped tool never runs (and opens no tool span). A
call that ran is recorded with its result (an exception as a failure, and re-raised, so
smolagents reports it to the model as it would); an enforced warn is added to a text result as
the nudge. Once the guard has stopped the run, every denial ends with seed 001's wrap-up
instruction (wrapper.py): the model's next request reads it last, and it answers through
`final_answer`, the one way a smolagents agent ends a run (the agent's own tool, never
wrapped). `loop_guard` is recorded as the run's ending.

Runs: `with guard.run(...)`, else the trace (the processor's default run id), else the
process-wide run "local" (docs/guard.md, "Runs"). smolagents tells a tool nothing of the step
it runs in, so calls of one model response are not known as siblings. A managed agent is not
a tool: guard its own tools.
"""

from __future__ import annotations

from typing import Any, Iterable

from smolagents import Tool

from .guard import Guard
from .wrapper import GuardedCall


class LoopguardTool(Tool):  # type: ignore[misc]  # smolagents ships no type hints for mypy here
    """`tool`, each call asked of `guard` first; the same name, description and inputs."""

    skip_forward_signature_validation = True  # forward() takes what the wrapped tool takes

    def __init__(self, tool: Tool, guard: Guard):
        self.wrapped = tool
        self.guard = guard
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
        call = GuardedCall(self.guard, self.name, self._arguments(args, kwargs))
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
    """Each tool wrapped (a LoopguardTool already wrapped is kept as it is)."""
    return [t if isinstance(t, LoopguardTool) else LoopguardTool(t, guard) for t in tools]
