"""The adapter for the OpenAI Agents SDK: the guard as tool guardrails.

    from otel_loopguard.enforce.openai_agents import guard_agent

    guard = otel_loopguard.guard()
    agent = guard_agent(guard, Agent(name="Support", tools=[lookup_order, search]))

    # or by hand, per tool:
    rails = loopguard_tool_guardrails(guard)
    @function_tool(tool_input_guardrails=[rails.check], tool_output_guardrails=[rails.record, rails.nudge])

Before a function tool runs, a tool *input* guardrail asks the guard. A denied call
is answered with `reject_content(decision.message)`: the SDK never invokes the tool,
the run goes on, and the model reads the message as the tool's output. After the
tool ran, a tool *output* guardrail feeds the result back with `guard.record()`.

`run_guarded(guard, agent, input)` adds seed 001's wrap-up: the run ends after the turn
whose calls the guard stopped, one more turn with tools disabled answers, and that answer is
returned with the stop (docs/guard.md, "Wrap-up").

The SDK opens the call's function span before any guardrail runs, so unlike the
decorator a denied call still has a tool span. The adapter marks it
`loopguard.dispatched=false` and `loopguard.guard=<kind>` (docs/findings.md), so the
receiver and the audit count it as a call that was not run.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Optional

from agents import (
    Agent,
    FunctionTool,
    MaxTurnsExceeded,
    ModelSettings,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
    ToolsToFinalOutputResult,
    default_tool_error_function,
)
from agents.tracing import get_current_span as current_sdk_span
from opentelemetry import trace

from ..bounded import BoundedMap
from ..conventions.handoffs import TO, handoff_arguments, handoff_name
from .decorator import late_warning, nudge, record_decision, run_scope, scoped_run_id
from .guard import MAX_RUNS, WARN, WRAP_UP, Decision, Guard, Stop
from .termination import record_termination

_log = logging.getLogger("otel_loopguard.enforce")
NAME = "otel_loopguard"
_PENDING = "_otel_loopguard_pending"  # on the ToolContext: the SDK builds one per call
_RUN = "_otel_loopguard_run_id"  # on the run's Usage: one per Runner.run
_USAGE = "_otel_loopguard_usage"  # on the run's Usage: which Runner.run a request count belongs to
_TURNS = "_otel_loopguard_turns"  # on the Guard: the turn numbering of its runs
_STOP = "_otel_loopguard_stop"  # on the run's context: the guard's stop that ended it
_GUARDED = "_otel_loopguard_guarded"  # on a handoff's invoke function: guarded already


class _Pending:
    """What the output guardrails need from the input guardrail's decision."""

    __slots__ = ("decision", "run_id", "recorded")

    def __init__(self, decision: Decision, run_id: str):
        self.decision = decision
        self.run_id = run_id
        self.recorded = False


class LoopguardGuardrails:
    """The guardrails for one guard. `guard_tools` / `guard_agent` attach them.

    `check` is the input guardrail; `record` and `nudge` are output guardrails, put
    first and last: every output guardrail sees the tool's real result, so recording
    first never misses a call another guardrail rejects, and the nudge (a
    `reject_content` that replaces the output) must not pre-empt the application's own.
    """

    def __init__(self, guard: Guard):
        self.guard = guard
        # Shared by every set of rails of this guard: an agent guarded anew for each
        # Runner.run must still number the turns of the run (the trace) as one sequence.
        turns = getattr(guard, _TURNS, None)
        if turns is None:
            turns = _Turns()
            setattr(guard, _TURNS, turns)
        self._turns: _Turns = turns
        self.check: ToolInputGuardrail[Any] = ToolInputGuardrail(self._check, name=f"{NAME}.check")
        self.record: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._record, name=f"{NAME}.record")
        self.nudge: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._nudge, name=f"{NAME}.nudge")

    def _check(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        tool = ctx.tool_name
        run_id = _run_id(ctx)
        turn = self._turns.turn(run_id, ctx.usage)
        # Raw model JSON, as on the span: the fingerprinter parses and canonicalises it.
        decision = self.guard.check(tool, ctx.tool_arguments or "{}", run_id=run_id, turn=turn)
        # Inside the SDK's function span: with an OTel bridge this is the call's tool span,
        # which a denial marks as not dispatched (record_decision).
        record_decision(decision, tool)
        if decision.denied:
            return ToolGuardrailFunctionOutput.reject_content(decision.message, output_info=_info(decision))
        setattr(ctx, _PENDING, _Pending(decision, run_id))
        return ToolGuardrailFunctionOutput.allow(output_info=_info(decision))

    def handoff_invoker(self, source: Agent[Any], h: Any) -> Callable[[Any, str], Awaitable[Any]]:
        """`on_invoke_handoff` for one handoff of `source`, asking the guard first."""
        invoke = h.on_invoke_handoff
        name, arguments = handoff_name(source.name, h.agent_name), handoff_arguments(source.name, h.agent_name)

        async def guarded(ctx: Any, input_json: str) -> Any:
            run_id = _run_id(ctx)
            decision = self.guard.check(name, arguments, run_id=run_id, turn=self._turns.turn(run_id, ctx.usage))
            record_decision(decision, name)
            if decision.denied:
                return source  # the run stays where it is: the handoff does not happen
            target = await invoke(ctx, input_json)
            self.guard.record(decision, {TO: target.name}, True, run_id=run_id)
            return target

        setattr(guarded, _GUARDED, True)
        return guarded

    def _record(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        pending: Optional[_Pending] = getattr(data.context, _PENDING, None)
        if pending is not None and not pending.recorded:
            pending.recorded = True
            found = self.guard.record(pending.decision, data.output, not _failed(data), run_id=pending.run_id)
            # A warn the call's own wall time revealed: the nudge guardrail (last) applies it.
            pending.decision = late_warning(self.guard, pending.decision, found, data.context.tool_name)
        return ToolGuardrailFunctionOutput.allow()

    def _nudge(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        pending: Optional[_Pending] = getattr(data.context, _PENDING, None)
        result = data.output
        # Observe-only (not enforced): the model's input is left exactly as it was.
        if pending is None or pending.decision.action != WARN or not pending.decision.enforced:
            return ToolGuardrailFunctionOutput.allow()
        if not isinstance(result, (str, dict)):
            return ToolGuardrailFunctionOutput.allow()  # structured outputs are left alone
        # The nudge in the one format every adapter uses (decorator.nudge): appended to text
        # after its marker, a `loop_guard_notice` key in a dict. Result digests strip both
        # (conventions/payloads.py, the default volatile fields), so a nudged result never
        # looks like new information. A dict goes as JSON: the SDK would send str(value).
        nudged = nudge(result, pending.decision.message)
        text = nudged if isinstance(nudged, str) else json.dumps(nudged, ensure_ascii=False, default=str)
        return ToolGuardrailFunctionOutput.reject_content(text, output_info=_info(pending.decision))


class _Turns:
    """The decision that requested a call, numbered per run.

    Every model response adds to `usage.requests` before its tools run, so parallel calls
    of one response share a turn: siblings, not repeats. But each `Runner.run` has its own
    Usage counting from 1, while the run is the trace: a loop of `Runner.run` calls in one
    trace would number every call turn 1. So each new (Usage, request) pair of a run gets
    the run's next number. A model that reports no requests leaves the turn unknown (each
    call its own decision)."""

    def __init__(self) -> None:
        self._last: BoundedMap[str, tuple[tuple[int, int], int]] = BoundedMap(MAX_RUNS)
        self._usages = itertools.count(1)
        self._lock = threading.Lock()  # one guard may serve runs in several threads

    def turn(self, run_id: str, usage: Any) -> Optional[int]:
        requests = usage.requests or 0
        if not requests:
            return None
        token = getattr(usage, _USAGE, None)
        if token is None:  # not id(): a finished run's Usage may be freed and its address reused
            token = next(self._usages)
            setattr(usage, _USAGE, token)
        key = (token, requests)
        with self._lock:
            last = self._last.get(run_id)
            if last is not None and last[0] == key:
                return last[1]
            number = (last[1] if last is not None else 0) + 1
            self._last.put(run_id, (key, number))
            return number


def loopguard_tool_guardrails(guard: Guard) -> LoopguardGuardrails:
    return LoopguardGuardrails(guard)


def guard_tools(guard: Guard | LoopguardGuardrails, tools: Iterable[Any]) -> list[Any]:
    """Attach the guardrails to every FunctionTool (in place; other tools are left as they
    are: hosted tools never reach the application). Attaching twice is a no-op."""
    rails = guard if isinstance(guard, LoopguardGuardrails) else LoopguardGuardrails(guard)
    out = list(tools)
    for tool in out:
        if not isinstance(tool, FunctionTool):
            continue
        inputs = [g for g in tool.tool_input_guardrails or [] if not _ours(g)]
        outputs = [g for g in tool.tool_output_guardrails or [] if not _ours(g)]
        # New lists: the old ones may be shared with other tools.
        # Checked last: the guard judges only calls the application's guardrails let through.
        tool.tool_input_guardrails = [*inputs, rails.check]
        tool.tool_output_guardrails = [rails.record, *outputs, rails.nudge]
    return out


def guard_handoffs(guard: Guard | LoopguardGuardrails, agent: Agent[Any]) -> Agent[Any]:
    """The guard on each of the agent's handoffs: before the SDK hands the run to the target,
    the guard judges the action (handoff, from, to) as it judges a tool call, and after it
    records it. A denied handoff (enforce mode) does not happen: the run stays with the agent
    that asked for it, and the SDK tells the model it was transferred to that same agent.
    Observe-only, every handoff happens and the decision is recorded on the current span.
    Guard every agent of a handoff graph (each hands off from its own place)."""
    from agents import Handoff, handoff

    rails = guard if isinstance(guard, LoopguardGuardrails) else LoopguardGuardrails(guard)
    guarded: list[Agent[Any] | Handoff[Any, Any]] = []
    for h in agent.handoffs:
        h = h if isinstance(h, Handoff) else handoff(h)
        if not getattr(h.on_invoke_handoff, _GUARDED, False):
            h = dataclasses.replace(h, on_invoke_handoff=rails.handoff_invoker(agent, h))
        guarded.append(h)
    agent.handoffs = guarded
    return agent


def guard_agent(guard: Guard | LoopguardGuardrails, agent: Agent[Any], *, end_on_stop: bool = False) -> Agent[Any]:
    """The guardrails on every function tool. With `end_on_stop` (what `run_guarded` uses),
    and when the agent runs the model again after its tools (the default
    `tool_use_behavior`), a behaviour that ends the run once the guard stopped it
    (`final_output` is then the stop's reason; `run_guarded` wraps it up). Without it the
    model reads the denial, which tells it to answer, and the run goes on."""
    rails = guard if isinstance(guard, LoopguardGuardrails) else LoopguardGuardrails(guard)
    guard_tools(rails, agent.tools)
    if end_on_stop and agent.tool_use_behavior == "run_llm_again":
        agent.tool_use_behavior = _EndWhenStopped(rails.guard)
    return agent


class _EndWhenStopped:
    """`tool_use_behavior`: after each turn's tools, end the run if the guard stopped it."""

    def __init__(self, guard: Guard):
        self.guard = guard

    def __call__(self, context: Any, results: Any) -> ToolsToFinalOutputResult:
        stop = self.guard.stopped(_run_id(context))
        if stop is None:
            return ToolsToFinalOutputResult(is_final_output=False, final_output=None)
        # The SDK may turn the final output into text: the stop itself goes on the run's context.
        setattr(context, _STOP, stop)
        return ToolsToFinalOutputResult(is_final_output=True, final_output=stop.reason)


@dataclass(frozen=True)
class GuardedRun:
    """What `run_guarded` returns: the answer (the wrap-up's partial result when stopped), the
    guard's stop (None when the agent finished by itself), and the SDK's last RunResult."""

    final_output: Any
    stopped: Optional[Stop]
    result: Any


async def run_guarded(guard: Guard, agent: Agent[Any], input: Any, **runner_kwargs: Any) -> GuardedRun:
    """`Runner.run` with the guard and seed 001's wrap-up: when the guard stops the run, one
    more model turn with tools disabled (`tool_choice="none"`) and the wrap-up instruction
    answers, that answer is the partial result, and `loop_guard` is recorded as the run's
    ending on the current span (call it inside the run's span)."""

    guard_agent(guard, agent, end_on_stop=True)
    result = await Runner.run(agent, input, **runner_kwargs)
    stop: Optional[Stop] = getattr(result.context_wrapper, _STOP, None)
    if stop is None:
        return GuardedRun(result.final_output, None, result)
    closing = agent.clone(model_settings=agent.model_settings.resolve(ModelSettings(tool_choice="none")),
                          tool_use_behavior="run_llm_again")
    kept = {k: v for k, v in runner_kwargs.items() if k in ("context", "run_config", "hooks")}
    items: list[Any] = [*result.to_input_list(), {"role": "user", "content": WRAP_UP}]
    # The same run: a tool call the model makes anyway is denied, not run.
    with run_scope(_run_id(result.context_wrapper)):
        try:
            final = await Runner.run(closing, items, max_turns=1, **kept)
        except MaxTurnsExceeded:  # it called a tool anyway (denied): no answer to return
            _log.warning("otel-loopguard: the wrap-up turn called a tool instead of answering; no partial result")
            record_termination("loop_guard", terminal_response=False)
            return GuardedRun(None, stop, result)
    record_termination("loop_guard")
    return GuardedRun(final.final_output, stop, final)


def _info(decision: Decision) -> dict[str, Any]:
    # Plain JSON: the SDK keeps it in the run result and persists it with a RunState.
    return {"action": decision.action, "kind": decision.kind, "reason": decision.reason,
            "enforced": decision.enforced}


def _ours(guardrail: Any) -> bool:
    return (guardrail.get_name() or "").startswith(f"{NAME}.")


def _run_id(ctx: Any) -> str:
    """The trace, like the processor's default run id; without an OTel trace, one id per
    Runner.run (kept on the run's Usage, which every tool call of the run shares)."""
    scoped = scoped_run_id()  # `with guard.run(...)` around Runner.run
    if scoped is not None:
        return scoped
    ctx_span = trace.get_current_span().get_span_context()
    if ctx_span.is_valid:
        return format(ctx_span.trace_id, "032x")
    usage = ctx.usage
    own = getattr(usage, _RUN, None)
    if own is None:
        own = f"oa-run-{uuid.uuid4().hex}"
        setattr(usage, _RUN, own)
    return own


def _failed(data: ToolOutputGuardrailData) -> bool:
    """Did the tool raise? The SDK turns the exception into a result string before output
    guardrails run; what is left is the error it puts on the function span, or (tracing
    off) its default failure message."""
    span = current_sdk_span()
    if span is not None and span.error is not None:
        return True
    return data.output == default_tool_error_function(data.context, Exception())
