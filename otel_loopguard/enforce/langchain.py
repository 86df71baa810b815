"""The adapter for LangChain v1 agents (`create_agent`, LangGraph): agent middleware.

    from langchain.agents import create_agent
    from otel_loopguard.enforce.langchain import LoopGuardMiddleware

    guard = otel_loopguard.guard()
    agent = create_agent(model, tools, middleware=[LoopGuardMiddleware(guard)])

`create_agent` routes every tool call the model requests through the middleware's
`wrap_tool_call` (`awrap_tool_call` under `ainvoke`/`astream`) before the tool node
runs it. The middleware asks the guard first:

- deny: the handler is not called, so the tool never runs (and starts no tool
  span); the model gets `ToolMessage(decision.message, status="error")` with the
  call's own `tool_call_id`, and the agent carries on;
- warn: the tool runs and the nudge is appended to the ToolMessage's content (text,
  or a text block), unless the tool is observed only (not enforced);
- after a real call, the guard records the ToolMessage's content, failed when its
  status is "error" or the handler raised.

Handoffs between agents (LangGraph swarm / supervisor tools that return
`Command(goto=<agent>, graph=Command.PARENT)`) are judged as the action
`handoff(<from> -> <to>)`, the source being the agent's `name` (LangChain's
`lc_agent_name`), as the processor, the receiver and the audit read their spans. When
the tool declares its destination (`__handoff_destination` in its metadata, as
langgraph-swarm's and langgraph-supervisor's handoff tools do) the guard is asked before
the tool runs; otherwise the tool runs (it only builds the Command) and the guard is
asked before the Command is handed to the graph. Denied, the handoff is not dispatched:
the model gets the error ToolMessage and the run stays with the agent that asked.

Once the guard stopped the run (docs/guard.md, "Wrap-up"), the next model request goes
out with no tools and the wrap-up instruction last (`wrap_model_call`): the model answers,
the agent ends on that answer, and `after_agent` records `loop_guard` and puts
`loopguard_stop` (kind, reason) in the result.

Decisions other than allow are recorded as a `loopguard.decision` event before the
tool runs, on the current span. OpenInference's LangChain instrumentation does not
make its spans current, so when no span is current the event goes on the span of the
current LangChain run as OpenInference reports it (the `tools` task span).

Runs: the trace of that span, like the processor; without one, the `run_id` of the
LangGraph invocation; else the invocation itself (an id the middleware's `before_agent`
keeps in the agent state), so a stop never outlives the invocation (a handoff: the user's
message that started the graph's invocation, since each agent's invocation is its own and
would hide a ping-pong between them); else (the middleware
used outside `create_agent`) the `thread_id`, or the shared run "local". Pass `run_id=` to
choose yourself. Decisions: tool calls requested by one model message are
siblings (one turn), so parallel identical calls are not counted as repeats.

Place it first in `middleware=[...]` (outermost): then error handlers such as
`ToolErrorMiddleware` run inside it and it sees their error ToolMessages; placed
inside them it records the exception as a failed call and re-raises it.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import uuid
from typing import Annotated, Any, Awaitable, Callable, Optional, Union

from typing_extensions import NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import ModelRequest, PrivateStateAttr, ToolCallRequest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command
from opentelemetry import trace

from ..bounded import BoundedMap
from ..conventions.handoffs import TO, handoff_arguments, handoff_name, node_of_namespace
from ..conventions.spec import LANGGRAPH_HANDOFF
from .decorator import late_warning, nudge, record_decision, scoped_run_id
from .guard import MAX_RUNS, WARN, WRAP_UP, Decision, Guard, Stop
from .termination import record_termination

ToolResult = Union[ToolMessage, Command, Any]
RunIdFn = Callable[[ToolCallRequest], Optional[str]]
_INVOCATION = "loopguard_invocation"
# What langgraph-swarm's and langgraph-supervisor's `create_handoff_tool` put in the tool's
# metadata: the agent it hands the run to.
HANDOFF_DESTINATION = "__handoff_destination"


class LoopGuardState(AgentState):  # type: ignore[type-arg]
    """The agent's state plus the id of the current invocation (private to the middleware)
    and, when the guard stopped the run, why (public: `invoke()`'s result carries it)."""

    loopguard_invocation: NotRequired[Annotated[str, PrivateStateAttr]]
    loopguard_stop: NotRequired[dict[str, str]]


class LoopGuardMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """Consults the guard before each tool call; a denied call is answered, never run."""

    state_schema = LoopGuardState

    def __init__(self, guard: Guard, *, run_id: Optional[RunIdFn] = None):
        super().__init__()
        self.guard = guard
        self._run_id_fn = run_id
        self._turns = _Turns()
        # invocation id -> the run its tool calls were judged in, and the stop it was wrapped
        # up for: what the model-call and after-agent hooks need (they see no tool call).
        self._invocation_runs: BoundedMap[str, str] = BoundedMap(MAX_RUNS)
        self._wrapped: BoundedMap[str, Stop] = BoundedMap(MAX_RUNS)

    # An id per invocation, kept in the state: the run when there is no trace. Stable through
    # the invocation (middleware may add messages, a resume after an interrupt continues it),
    # new for the next one, so a stop never outlives the invocation it happened in.
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {_INVOCATION: uuid.uuid4().hex}

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self.before_agent(state, runtime)

    # -- the wrap-up (seed 001): one tool-free model turn once the guard stopped the run -------
    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        return handler(self._wrap_up(request))

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]) -> Any:
        return await handler(self._wrap_up(request))

    def after_agent(self, state: Any, runtime: Any) -> Optional[dict[str, Any]]:
        stop = self._wrapped.pop(_invocation(state) or "")
        if stop is None:
            return None
        with trace.use_span(_decision_span(), end_on_exit=False, record_exception=False,
                            set_status_on_exception=False):
            record_termination("loop_guard")
        return {"loopguard_stop": {"kind": stop.kind, "reason": stop.reason}}

    async def aafter_agent(self, state: Any, runtime: Any) -> Optional[dict[str, Any]]:
        return self.after_agent(state, runtime)

    def _wrap_up(self, request: ModelRequest) -> ModelRequest:
        """The model request as it is, or, once the guard stopped this invocation's run, with
        no tools (the model cannot call one) and the wrap-up instruction last."""
        invocation = _invocation(request.state)
        run_id = self._invocation_runs.get(invocation) if invocation else None
        stop = self.guard.stopped(run_id) if run_id else None
        if stop is None or invocation is None:
            return request
        self._wrapped.put(invocation, stop)
        return request.override(tools=[], tool_choice=None, messages=[*request.messages, HumanMessage(WRAP_UP)])

    # -- LangChain hooks ---------------------------------------------------------------
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolResult],
    ) -> ToolResult:
        ask = self._before(request)
        if ask.decision.denied:
            return _denied(request, ask.decision)
        try:
            result = handler(request)
        except GraphBubbleUp:
            raise  # an interrupt, not a finished call: it is checked again on resume
        except Exception as exc:
            self.guard.record(ask.decision, f"{type(exc).__name__}: {exc}", False, run_id=ask.run_id)
            raise
        return self._after(request, ask, result)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        ask = self._before(request)
        if ask.decision.denied:
            return _denied(request, ask.decision)
        try:
            result = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            self.guard.record(ask.decision, f"{type(exc).__name__}: {exc}", False, run_id=ask.run_id)
            raise
        return self._after(request, ask, result)

    # -- the guard -----------------------------------------------------------------------
    def _before(self, request: ToolCallRequest) -> "_Ask":
        call = request.tool_call
        span = _decision_span()
        run_id = self._run_id(request, span)
        invocation = _invocation(request.state)
        if invocation:
            self._invocation_runs.put(invocation, run_id)
        ask = _Ask(request, run_id, self._turns.turn(run_id, _requesting_message(request)), span)
        target = _declared_destination(request)
        if target is not None:
            return self._ask_handoff(ask, target)
        tool = str(call.get("name") or "")
        ask.decision = self.guard.check(tool, dict(call.get("args") or {}), run_id=run_id, turn=ask.turn)
        record_decision(ask.decision, tool, span)
        return ask

    def _ask_handoff(self, ask: "_Ask", target: str) -> "_Ask":
        """The guard asked about the handoff (source -> target) instead of the tool's name, in
        the run around the agents (an agent's own invocation would hide a ping-pong)."""
        request = ask.request
        run_id = self._run_id(request, ask.span, handoff=True)
        if run_id != ask.run_id:
            ask.run_id, ask.turn = run_id, self._turns.turn(run_id, _requesting_message(request))
            invocation = _invocation(request.state)
            if invocation:  # the wrap-up follows the run this invocation's last call was judged in
                self._invocation_runs.put(invocation, run_id)
        name = handoff_name(ask.source, target)
        ask.decision = self.guard.check(name, handoff_arguments(ask.source, target), run_id=ask.run_id, turn=ask.turn)
        ask.target = target
        record_decision(ask.decision, name, ask.span)
        return ask

    def _after(self, request: ToolCallRequest, ask: "_Ask", result: ToolResult) -> ToolResult:
        if ask.target is None:
            target = _parent_goto(result)
            if target is not None:
                # A handoff told only by the Command it returned: judged as one now, before the
                # graph dispatches it. The tool's own check is dropped unrecorded (it only
                # built the Command), so the run counts one call for the handoff.
                ask = self._ask_handoff(ask, target)
                if ask.decision.denied:
                    return _denied(request, ask.decision)
        decision, run_id = ask.decision, ask.run_id
        message = _tool_message(result, request.tool_call.get("id"))
        if ask.target is not None:
            # A handoff's result is its target, as the conventions read its span.
            self.guard.record(decision, {TO: ask.target}, message is None or message.status != "error", run_id=run_id)
        elif message is None:
            # A Command without a ToolMessage for this call: it ran, its update is the result.
            update = getattr(result, "update", None)
            self.guard.record(decision, update if update is not None else repr(result), True, run_id=run_id)
            return result
        else:
            found = self.guard.record(decision, message.content, message.status != "error", run_id=run_id)
            # A warn the call's own wall time revealed: nudged like one decided before the call.
            decision = late_warning(self.guard, decision, found, str(request.tool_call.get("name") or ""), ask.span)
        if message is None or decision.action != WARN or not decision.enforced:
            return result  # an observe-only tool never changes what the model reads
        return _replace_message(result, message, _nudged(message, decision.message))

    def _run_id(self, request: ToolCallRequest, span: trace.Span, handoff: bool = False) -> str:
        if self._run_id_fn is not None:
            chosen = self._run_id_fn(request)
            if chosen:
                return str(chosen)
        scoped = scoped_run_id()  # `with guard.run(...)` around the invocation
        if scoped is not None:
            return scoped
        ctx = span.get_span_context()
        if ctx.is_valid:
            return format(ctx.trace_id, "032x")
        info = getattr(request.runtime, "execution_info", None)
        run = getattr(info, "run_id", None)
        if run:
            return f"langgraph:run_id:{run}"
        # A handoff belongs to the graph around the agents, which has no id of its own here:
        # the user's message that started this invocation of it (agents add none) stands in.
        asked = _last_human_message(request) if handoff else None
        if asked:
            return f"langgraph:request:{asked}"
        # No trace and no run id: the invocation is the run. A run stopped once stays stopped,
        # so a longer-lived key (the thread, or one shared "local" run) would deny every later
        # turn of the conversation, or every call of the process.
        invocation = _invocation(request.state)
        if invocation:
            return f"langgraph:invocation:{invocation}"
        thread = getattr(info, "thread_id", None)
        return f"langgraph:thread_id:{thread}" if thread else "local"


class _Ask:
    """One tool call's question to the guard: its run and turn, the span decisions go on,
    the agent asking, and (a handoff) the agent it hands the run to."""

    __slots__ = ("request", "run_id", "turn", "span", "source", "target", "decision")

    def __init__(self, request: ToolCallRequest, run_id: str, turn: Optional[int], span: trace.Span):
        self.request = request
        self.run_id = run_id
        self.turn = turn
        self.span = span
        self.source = _source_agent(request)
        self.target: Optional[str] = None
        self.decision: Decision = _UNASKED


_UNASKED = Decision(action="allow", kind=None, reason="", message="", enforced=False, ticket=None)


def _source_agent(request: ToolCallRequest) -> Optional[str]:
    """The agent whose tool this is: the `name` given to `create_agent` (`lc_agent_name`), else
    the node it runs as in the parent graph, as the conventions read the tool's span."""
    config = getattr(request.runtime, "config", None)
    metadata = config.get("metadata") if isinstance(config, dict) else None
    if not isinstance(metadata, dict):
        return None
    name = metadata.get(LANGGRAPH_HANDOFF.metadata_key) or node_of_namespace(metadata.get(LANGGRAPH_HANDOFF.namespace_key))
    return str(name) if name else None


def _last_human_message(request: ToolCallRequest) -> Optional[str]:
    state = request.state
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    for message in reversed(messages or ()):
        if isinstance(message, HumanMessage):
            return str(message.id) if message.id else None
    return None


def _declared_destination(request: ToolCallRequest) -> Optional[str]:
    metadata = getattr(request.tool, "metadata", None)
    target = metadata.get(HANDOFF_DESTINATION) if isinstance(metadata, dict) else None
    return str(target) if target else None


def _parent_goto(result: ToolResult) -> Optional[str]:
    """The agent a `Command(goto=<agent>, graph=Command.PARENT)` hands the run to, else None."""
    if not isinstance(result, Command) or result.graph != Command.PARENT:
        return None
    goto = result.goto
    if isinstance(goto, (list, tuple)) and len(goto) == 1:
        goto = goto[0]
    return goto if isinstance(goto, str) and goto else None


class _TurnCounter:
    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.count = 0
        self.last: Optional[str] = None


class _Turns:
    """Numbers the model messages that requested tool calls, per run: 1, 2, 3...

    A call whose message is the latest one is a sibling (same turn); any other message
    starts a new turn. By message identity rather than position, so trimming or
    summarising the history never makes two decisions look like one, and a message id
    seen long ago (ids reused across invocations) never joins an old turn."""

    def __init__(self) -> None:
        self._runs: BoundedMap[str, _TurnCounter] = BoundedMap(MAX_RUNS)
        self._lock = threading.Lock()

    def turn(self, run_id: str, key: Optional[str]) -> Optional[int]:
        if key is None:
            return None  # unknown: the guard treats the call as its own decision
        with self._lock:
            counter = self._runs.get(run_id)
            if counter is None:
                counter = _TurnCounter()
                self._runs.put(run_id, counter)
            if key != counter.last:
                counter.count += 1
                counter.last = key
            return counter.count


def _invocation(state: Any) -> Optional[str]:
    found = state.get(_INVOCATION) if isinstance(state, dict) else getattr(state, _INVOCATION, None)
    return str(found) if found else None


def _requesting_message(request: ToolCallRequest) -> Optional[str]:
    """An identity for the model message that requested this call (its siblings share it)."""
    call_id = request.tool_call.get("id")
    if not call_id:
        return None
    state = request.state
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    for message in reversed(messages or ()):
        if not isinstance(message, AIMessage):
            continue
        ids = [c.get("id") for c in message.tool_calls]
        if call_id in ids:
            return f"id:{message.id}" if message.id else "calls:" + "\x1f".join(str(i) for i in ids)
    return None


def _decision_span() -> trace.Span:
    """The current span; under OpenInference (which never makes its spans current), the
    span of the current LangChain run."""
    span = trace.get_current_span()
    if span.get_span_context().is_valid:
        return span
    openinference = sys.modules.get("openinference.instrumentation.langchain")
    if openinference is not None:
        try:
            found = openinference.get_current_span()
        except Exception:  # not instrumented, or an older release without the helper
            found = None
        if found is not None and found.get_span_context().is_valid:
            return found
    return span


def _denied(request: ToolCallRequest, decision: Decision) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=decision.message, tool_call_id=call.get("id") or "", name=call.get("name"),
                       status="error")


def _tool_message(result: ToolResult, call_id: Optional[str]) -> Optional[ToolMessage]:
    if isinstance(result, ToolMessage):
        return result
    candidates: Any = result
    if isinstance(result, Command):
        update = result.update
        candidates = update.get("messages") if isinstance(update, dict) else None
    if isinstance(candidates, (list, tuple)):
        messages = [m for m in candidates if isinstance(m, ToolMessage)]
        return next((m for m in messages if m.tool_call_id == call_id), None)
    return None


def _nudged(message: ToolMessage, text: str) -> ToolMessage:
    content = message.content
    if isinstance(content, str):
        new: Any = nudge(content, text)  # the same text form as the decorator's
    else:
        new = [*content, {"type": "text", "text": text}]
    return message.model_copy(update={"content": new})


def _replace_message(result: ToolResult, old: ToolMessage, new: ToolMessage) -> ToolResult:
    if result is old:
        return new
    if isinstance(result, Command) and isinstance(result.update, dict):
        messages = [new if m is old else m for m in result.update.get("messages") or ()]
        return dataclasses.replace(result, update={**result.update, "messages": messages})
    if isinstance(result, list):
        return [new if m is old else m for m in result]
    return result


__all__ = ["LoopGuardMiddleware"]
