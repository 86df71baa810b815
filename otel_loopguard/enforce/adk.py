"""The adapter for Google ADK: the guard as a runner plugin.

    from otel_loopguard.enforce.adk import LoopguardPlugin

    guard = otel_loopguard.guard()
    runner = InMemoryRunner(agent=root_agent, app_name="support", plugins=[LoopguardPlugin(guard)])
    # or App(name="support", root_agent=root_agent, plugins=[LoopguardPlugin(guard)])

Before each tool call of every agent the runner runs (sub-agents and `AgentTool`s too), the
plugin's `before_tool_callback` asks the guard. A denied call is answered with
`{"result": decision.message}`: ADK never runs the tool, and the model reads the message as
the tool's response. `after_tool_callback` and `on_tool_error_callback` feed the outcome back
(`guard.record()`); an enforced warn is added to the result as the nudge. Once the guard has
stopped the run, `before_model_callback` turns the next model request into seed 001's wrap-up:
no tools, and the wrap-up instruction as the last user turn; `loop_guard` is recorded as the
run's ending (docs/guard.md, "Wrap-up").

A plugin's callbacks run before the agents' own, so a denied call never reaches them. ADK
opens the call's `execute_tool <tool>` span before the callbacks and marks it as a tool span
only when it ends, so a denial marks that span `loopguard.dispatched=false` itself.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types
from opentelemetry import trace

from ..bounded import BoundedMap
from ..conventions import attributes as conv
from .decorator import late_warning, nudge, record_decision, scoped_or_traced_run_id
from .guard import MAX_RUNS, WARN, WRAP_UP, Decision, Guard
from .termination import record_termination

NAME = "otel_loopguard"
MAX_PENDING = 4096  # calls checked and not yet finished, across runs


class _Pending:
    __slots__ = ("decision", "run_id")

    def __init__(self, decision: Decision, run_id: str):
        self.decision = decision
        self.run_id = run_id


class LoopguardPlugin(BasePlugin):  # type: ignore[misc]  # ADK ships no type hints for mypy here
    """The guard for every agent of an ADK runner. One plugin per guard."""

    def __init__(self, guard: Guard, name: str = NAME):
        super().__init__(name=name)
        self.guard = guard
        self._pending: BoundedMap[str, _Pending] = BoundedMap(MAX_PENDING)
        self._wrapped: BoundedMap[str, bool] = BoundedMap(MAX_RUNS)  # runs whose wrap-up was asked
        self._lock = threading.Lock()

    async def before_tool_callback(self, *, tool: Any, tool_args: dict[str, Any],
                                   tool_context: Any) -> Optional[dict[str, Any]]:
        run_id = _run_id(tool_context)
        decision = self.guard.check(tool.name, dict(tool_args), run_id=run_id)
        span = trace.get_current_span()  # ADK's `execute_tool <tool>` span, still unmarked
        record_decision(decision, tool.name, span)
        if decision.denied:
            if getattr(span, "name", None) == f"execute_tool {tool.name}":
                span.set_attribute(conv.DISPATCHED, False)
                span.set_attribute(conv.GUARD, decision.kind or "")
            return {"result": decision.message}
        with self._lock:
            self._pending.put(_call_key(tool_context, run_id), _Pending(decision, run_id))
        return None

    async def on_tool_error_callback(self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any,
                                     error: Exception) -> Optional[dict[str, Any]]:
        pending = self._take(tool_context)
        if pending is not None:
            self.guard.record(pending.decision, f"{type(error).__name__}: {error}", False, run_id=pending.run_id)
        return None  # the agent's own error callback (or ADK) answers

    async def after_tool_callback(self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any,
                                  result: Any) -> Any:
        pending = self._take(tool_context)
        if pending is None:  # denied, or failed and recorded already
            return None
        found = self.guard.record(pending.decision, result, True, run_id=pending.run_id)
        decision = late_warning(self.guard, pending.decision, found, tool.name)
        if decision.action == WARN and decision.enforced:  # observe-only guards change nothing
            return nudge(result, decision.message)
        return None

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> Any:
        run_id = _run_id(callback_context)
        if self.guard.stopped(run_id) is None:
            return None
        # The wrap-up: the model answers without tools (a call it makes anyway is denied).
        llm_request.tools_dict.clear()
        llm_request.config.tools = None
        llm_request.contents.append(types.Content(role="user", parts=[types.Part(text=WRAP_UP)]))
        with self._lock:
            first = self._wrapped.get(run_id) is None
            self._wrapped.put(run_id, True)
        if first:
            record_termination("loop_guard")
        return None

    def _take(self, tool_context: Any) -> Optional[_Pending]:
        with self._lock:
            return self._pending.pop(_call_key(tool_context, _run_id(tool_context)))


def _run_id(ctx: Any) -> str:
    """`with guard.run(...)`, else the trace (the processor's default run id), else ADK's
    invocation: one per `run_async`."""
    return scoped_or_traced_run_id() or f"adk-{ctx.invocation_id}"


def _call_key(tool_context: Any, run_id: str) -> str:
    return f"{run_id}/{tool_context.function_call_id}"
