"""The adapter for CrewAI: the guard as CrewAI's tool-call and LLM-call hooks.

    from otel_loopguard.enforce.crewai import LoopguardHooks

    hooks = LoopguardHooks(otel_loopguard.guard()).register()   # before crew.kickoff()
    crew.kickoff()

Before each tool call of every agent (native function calling, and the ReAct text path, which
runs the same hooks), CrewAI runs its `before_tool_call` hooks: the guard is asked there, and a denied call is
blocked (the hook returns False), so CrewAI never runs the tool; the `after_tool_call` hook
then hands the model the guard's message instead of CrewAI's "blocked by hook". A call that ran
is recorded with its result (CrewAI's "Error executing tool: ..." as a failure); an enforced
warn is added to the result as the nudge. Calls requested by one model response share a turn
(the `before_llm_call` hook counts the run's model requests).

Once the guard has stopped the run, the `before_llm_call` hook adds seed 001's wrap-up
instruction as the last user message of the next model request, and `loop_guard` is recorded
as the run's ending (docs/guard.md, "Wrap-up"). CrewAI's hooks cannot withdraw the tools from
that request (the executor passes its own tool list), so a call the model makes anyway is
denied, and the agent ends on the model's answer.

CrewAI copies the global LLM hooks into an agent's executor when it makes it, at the agent's
first kickoff, and keeps that executor: register before the first `kickoff()`.
`unregister()` removes the hooks (an executor's copy of the LLM hook then does nothing).
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from crewai.hooks import (
    register_after_tool_call_hook,
    register_before_llm_call_hook,
    register_before_tool_call_hook,
    unregister_after_tool_call_hook,
    unregister_before_llm_call_hook,
    unregister_before_tool_call_hook,
)

from ..bounded import BoundedMap, BoundedSet
from .decorator import current_run_id, late_warning, nudge, record_decision, scoped_or_traced_run_id
from .guard import MAX_RUNS, WARN, WRAP_UP, Decision, Guard
from .termination import record_termination

MAX_PENDING = 4096  # calls checked and not yet finished, across runs
# What CrewAI hands the model for a call a hook blocked, and for a tool that raised.
BLOCKED = "Tool execution blocked by hook."
FAILED = "Error executing tool: "


class _Pending:
    __slots__ = ("arguments", "decision", "run_id")

    def __init__(self, arguments: dict[str, Any], decision: Decision, run_id: str):
        self.arguments = arguments  # CrewAI's own dict, shared by the call's before and after contexts
        self.decision = decision
        self.run_id = run_id


class LoopguardHooks:
    """The guard for every CrewAI agent of the process, as global hooks. One per guard."""

    def __init__(self, guard: Guard):
        self.guard = guard
        self._pending: BoundedMap[int, _Pending] = BoundedMap(MAX_PENDING)
        self._turns: BoundedMap[str, int] = BoundedMap(MAX_RUNS)  # model requests per run
        self._wrapped = BoundedSet(MAX_RUNS)  # runs whose wrap-up was asked
        self._lock = threading.Lock()
        self._registered = False

    def register(self) -> "LoopguardHooks":
        """Add the hooks to CrewAI's global hooks (once); returns self."""
        if not self._registered:
            register_before_tool_call_hook(self.before_tool_call)
            register_after_tool_call_hook(self.after_tool_call)
            register_before_llm_call_hook(self.before_llm_call)
            self._registered = True
        return self

    def unregister(self) -> None:
        """Remove the hooks."""
        unregister_before_tool_call_hook(self.before_tool_call)
        unregister_after_tool_call_hook(self.after_tool_call)
        unregister_before_llm_call_hook(self.before_llm_call)
        self._registered = False

    def before_tool_call(self, context: Any) -> Optional[bool]:
        run_id = _run_id(context)
        with self._lock:
            turn = self._turns.get(run_id)
        decision = self.guard.check(context.tool_name, dict(context.tool_input), run_id=run_id, turn=turn)
        record_decision(decision, context.tool_name)  # no tool span yet: CrewAI opens none for a blocked call
        with self._lock:
            self._pending.put(id(context.tool_input), _Pending(context.tool_input, decision, run_id))
        return False if decision.denied else None

    def after_tool_call(self, context: Any) -> Optional[str]:
        with self._lock:
            pending = self._pending.pop(id(context.tool_input))
        if pending is None or pending.arguments is not context.tool_input:
            return None  # not a call this guard checked
        decision = pending.decision
        if decision.denied:
            return decision.message
        result = context.tool_result
        if isinstance(result, str) and result.startswith(BLOCKED):
            return None  # another hook blocked it: the call never ran
        failed = isinstance(context.raw_tool_result, str) and context.raw_tool_result.startswith(FAILED)
        found = self.guard.record(decision, result, not failed, run_id=pending.run_id)
        decision = late_warning(self.guard, decision, found, context.tool_name)
        if decision.action == WARN and decision.enforced and isinstance(result, str):
            return str(nudge(result, decision.message))
        return None

    def before_llm_call(self, context: Any) -> None:
        if not self._registered:
            return None  # an executor's copy, made before unregister()
        run_id = _run_id(context)
        with self._lock:
            self._turns.put(run_id, (self._turns.get(run_id) or 0) + 1)
        if self.guard.stopped(run_id) is None:
            return None
        messages = context.messages  # CrewAI's list: changed in place, as its hooks must
        if not (messages and messages[-1].get("content") == WRAP_UP):
            messages.append({"role": "user", "content": WRAP_UP})
        with self._lock:
            first = self._wrapped.add(run_id)
        if first:
            record_termination("loop_guard")
        return None


def _run_id(context: Any) -> str:
    """`with guard.run(...)`, else the trace (the processor's default run id), else the crew
    (every kickoff of one Crew object is one run), else the shared run "local"."""
    run_id = scoped_or_traced_run_id()
    if run_id is not None:
        return run_id
    crew = getattr(context, "crew", None)
    if crew is not None and getattr(crew, "id", None) is not None:
        return f"crewai-{crew.id}"
    return current_run_id()
