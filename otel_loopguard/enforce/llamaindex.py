"""The adapter for LlamaIndex agents: the guard as a wrapper around each tool.

    from otel_loopguard.enforce.llamaindex import guard_tools

    guard = otel_loopguard.guard()
    agent = FunctionAgent(tools=guard_tools([FunctionTool.from_defaults(fn=lookup_order)], guard), llm=llm)
    # the workflow agents (ReActAgent, an AgentWorkflow's agents) call tools through the same step

Every call of a wrapped tool (`FunctionTool`, `QueryEngineTool`, any `BaseTool`) asks the
guard first (`LoopguardTool.acall` / `call`). A denied call is answered with a
`ToolOutput(is_error=True)` holding the guard's message: the wrapped tool never runs (and
opens no tool span; under OpenLLMetry the workflow's `call_tool` step span is the call's tool
span, marked not dispatched), and a `return_direct` tool's denial does not end the run as its
answer. A call that ran is recorded with its output (`is_error`, or an exception, re-raised so
the workflow reports it to the model as it would, as a failure); an enforced warn is added to
the output's text as the nudge. Once the guard has stopped the run, every denial ends with seed
001's wrap-up instruction (wrapper.py): the model's next request carries it last and the
agent ends on its answer; `loop_guard` is recorded as the run's ending.

Runs: `with guard.run(...)`, else the trace (the processor's default run id), else the
process-wide run "local" (docs/guard.md, "Runs"). Turns: LlamaIndex tells a tool nothing of the
model response it answers, so the adapter counts each run's model requests (its
instrumentation events, `LLMChatStartEvent`); the calls of one response share a turn. A
`FunctionTool` whose function takes the workflow's `Context` cannot be wrapped (the workflow
hands the Context to FunctionTools only): LoopguardTool refuses it. The AgentWorkflow's own
`handoff` tool is not wrapped.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Optional, TypeVar

from llama_index.core.instrumentation import DISPATCHER_SPAN_DECORATED_ATTR, get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatStartEvent
from llama_index.core.tools import FunctionTool
from llama_index.core.tools.types import AsyncBaseTool, BaseTool, ToolMetadata, ToolOutput, adapt_to_async_tool
from pydantic import PrivateAttr

from ..bounded import BoundedMap
from .decorator import LOCAL_RUN, scoped_or_traced_run_id
from .guard import MAX_RUNS, Guard
from .wrapper import GuardedCall

F = TypeVar("F", bound=Callable[..., Any])


def _no_span_of_its_own(method: F) -> F:
    """LlamaIndex traces every tool subclass's call/acall; the wrapped tool's span is the
    call's one tool span (a second around it would count each call twice), and a denied call
    has none. Its dispatcher skips a method carrying this marker."""
    setattr(method, DISPATCHER_SPAN_DECORATED_ATTR, True)
    return method


class LoopguardTool(AsyncBaseTool):  # type: ignore[misc]  # LlamaIndex's tool types are untyped for mypy here
    """`tool`, each call asked of `guard` first; the same metadata (name, schema)."""

    def __init__(self, tool: BaseTool, guard: Guard):
        if isinstance(tool, FunctionTool) and tool.requires_context:
            raise TypeError(f"LoopguardTool: {tool.metadata.get_name()} takes the workflow Context, which the "
                            "workflow hands to a FunctionTool only; leave it unwrapped (docs/frameworks.md)")
        self.wrapped: AsyncBaseTool = adapt_to_async_tool(tool)
        self.guard = guard
        self._requests = _model_requests()  # counting before the agent's first request

    @property
    def metadata(self) -> ToolMetadata:
        return self.wrapped.metadata

    @_no_span_of_its_own
    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        call = self._check(args, kwargs)
        if call.denied:
            return self._denied(call, kwargs)
        try:
            output = self.wrapped.call(*args, **kwargs)
        except Exception as exc:
            call.failed(exc)
            raise
        return self._ran(call, output)

    @_no_span_of_its_own
    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        call = self._check(args, kwargs)
        if call.denied:
            return self._denied(call, kwargs)
        try:
            output = await self.wrapped.acall(*args, **kwargs)
        except Exception as exc:
            call.failed(exc)
            raise
        return self._ran(call, output)

    def _check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> GuardedCall:
        arguments = dict(kwargs) if not args else {"args": list(args), **kwargs}
        return GuardedCall(self.guard, self.metadata.get_name(), arguments, self._requests.turn)

    def _denied(self, call: GuardedCall, kwargs: dict[str, Any]) -> ToolOutput:
        text = call.denial()
        return ToolOutput(content=text, tool_name=call.tool, raw_input=dict(kwargs), raw_output=text, is_error=True)

    def _ran(self, call: GuardedCall, output: ToolOutput) -> ToolOutput:
        if output.is_error:
            call.failed(output.content)
            return output
        nudged = call.succeeded(output.content)
        if nudged != output.content:
            output.content = nudged  # the text the model reads; raw_output stays the tool's own
        return output


class _ModelRequests(BaseEventHandler):  # type: ignore[misc]
    """Each run's model requests so far, counted from LlamaIndex's events: the turn of the
    calls that answer the last one."""

    @classmethod
    def class_name(cls) -> str:
        return "LoopguardModelRequests"

    _counts: BoundedMap[str, int] = PrivateAttr(default_factory=lambda: BoundedMap(MAX_RUNS))
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, LLMChatStartEvent):
            run_id = _run_id()
            with self._lock:
                self._counts.put(run_id, (self._counts.get(run_id) or 0) + 1)

    def turn(self, run_id: str) -> Optional[int]:
        with self._lock:
            return self._counts.get(run_id)


_REQUESTS: Optional[_ModelRequests] = None
_REQUESTS_LOCK = threading.Lock()


def _model_requests() -> _ModelRequests:
    """The one counter, on LlamaIndex's root dispatcher from the first wrapped tool on."""
    global _REQUESTS
    with _REQUESTS_LOCK:
        if _REQUESTS is None:
            _REQUESTS = _ModelRequests()
            get_dispatcher().add_event_handler(_REQUESTS)
        return _REQUESTS


def _run_id() -> str:
    """The run the calls will be judged in (wrapper.py: decorator.current_run_id), without its
    warning about the shared run: a model request outside any agent is no call."""
    return scoped_or_traced_run_id() or LOCAL_RUN


def guard_tools(tools: Iterable[BaseTool], guard: Guard) -> list[BaseTool]:
    """Each tool wrapped (a LoopguardTool already wrapped is kept as it is)."""
    return [t if isinstance(t, LoopguardTool) else LoopguardTool(t, guard) for t in tools]
