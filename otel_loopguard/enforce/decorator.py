"""The adapter for plain Python tools: a decorator that consults the guard first.

    guard = otel_loopguard.guard()

    @guard.tool
    def lookup_order(order_id: str) -> dict: ...

A denied call is never executed; it returns the guard's message (the model still
gets a tool result). The decision is recorded as a `loopguard.decision` event on
the current span before the tool runs, so it precedes any span the tool starts.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import uuid
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Optional, TypeVar

from opentelemetry import trace

from ..conventions import attributes as conv
from ..conventions import is_tool_span
from ..conventions.payloads import NUDGE_MARK
from ..conventions.spec import TASK_TOOL_CONVENTIONS
from .guard import DENY, WARN, Decision, Guard

F = TypeVar("F", bound=Callable[..., Any])
_log = logging.getLogger("otel_loopguard.enforce")


# The run named by `with guard.run(...)`: for code without a trace (a worker, a script).
_RUN_SCOPE: ContextVar[Optional[str]] = ContextVar("otel_loopguard_run", default=None)
LOCAL_RUN = "local"
_warned_local = False


def scoped_run_id() -> Optional[str]:
    """The run of the innermost `guard.run(...)` block, if any."""
    return _RUN_SCOPE.get()


@contextlib.contextmanager
def run_scope(run_id: Optional[str] = None) -> Iterator[str]:
    """Calls inside the block are one run, named `run_id` (a new id when None), whatever the
    trace; blocks nest, the innermost wins; the previous run is back after the block."""
    name = run_id or f"run-{uuid.uuid4().hex}"
    token = _RUN_SCOPE.set(name)
    try:
        yield name
    finally:
        _RUN_SCOPE.reset(token)


def scoped_or_traced_run_id() -> Optional[str]:
    """The `guard.run(...)` block's run, else the current trace's (the processor's default run
    id), else None: each adapter has its framework's own fallback."""
    scoped = _RUN_SCOPE.get()
    if scoped is not None:
        return scoped
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def current_run_id() -> str:
    """The run a call belongs to: the `guard.run(...)` block, else the current trace, else the
    one shared run "local"."""
    run_id = scoped_or_traced_run_id()
    if run_id is not None:
        return run_id
    _warn_local()
    return LOCAL_RUN


def _warn_local() -> None:
    global _warned_local
    if not _warned_local:
        _warned_local = True
        _log.warning("otel-loopguard: a guarded call outside any trace and any guard.run() block is judged in "
                     "the one run %r shared by the whole process: once stopped, it stays stopped; wrap each "
                     "agent run in `with guard.run(...)` or a span (docs/guard.md, Runs)", LOCAL_RUN)


def record_decision(decision: Decision, tool: str, span: Optional[trace.Span] = None) -> None:
    """The decision as a `loopguard.decision` event on the current span (or `span`). An
    observe-only decision says what enforce mode would do (`would_warn`, `would_block`). A
    denial inside an open tool span (the application's own `execute_tool` span around the
    call, or the framework's) marks that span as not dispatched, so the processor, the
    receiver and the audit count it as a call that did not run."""
    if decision.action not in (DENY, WARN):
        return
    span = span if span is not None else trace.get_current_span()
    span.add_event(
        "loopguard.decision",
        {
            "loopguard.decision": decision_verb(decision),
            "loopguard.finding.kind": decision.kind or "",
            "loopguard.finding.reason": decision.reason,
            "loopguard.tool.name": tool,
            "loopguard.dispatched": not decision.denied,
        },
    )
    if decision.denied and _is_call_span(getattr(span, "attributes", None) or {}):
        span.set_attribute(conv.DISPATCHED, False)
        span.set_attribute(conv.GUARD, decision.kind or "")


def _is_call_span(attributes: Any) -> bool:
    """A tool span, or a generic step span that already names its tool: OpenLLMetry's LlamaIndex
    `call_tool` step, the only span of a call the wrapper denies (spec.TASK_TOOL_CONVENTIONS)."""
    return is_tool_span(attributes) or any(
        attributes.get(c.marker) in c.marker_values and c.requires in attributes for c in TASK_TOOL_CONVENTIONS)


def late_warning(guard: Guard, decision: Decision, found: list[Any], tool: str,
                 span: Optional[trace.Span] = None) -> Decision:
    """The decision to nudge with once the call ran: a warn its own outcome revealed (the
    wall-time budget, Guard.late_warning) is recorded now, on the span still open."""
    late = guard.late_warning(decision, found)
    if late is None:
        return decision
    record_decision(late, tool, span)
    return late


def decision_verb(decision: Decision) -> str:
    """deny / warn when the guard acts, would_block / would_warn when it only observes."""
    if decision.action == DENY:
        return "deny" if decision.enforced else "would_block"
    return "warn" if decision.enforced else "would_warn"


def nudge(result: Any, message: str) -> Any:
    """A warn-level nudge added to the tool result the model will read."""
    if isinstance(result, str):
        return f"{result}{NUDGE_MARK}{message.removeprefix('[loop guard] ')}"
    if isinstance(result, dict):
        return {**result, "loop_guard_notice": message}
    return result


def guarded(guard: Guard, name: Optional[str] = None) -> Callable[[F], F]:
    def wrap(fn: F) -> F:
        tool = name or fn.__name__
        signature = inspect.signature(fn)
        # A method's object is not an argument of the tool call: its state (a counter, a
        # client) may change on every call and would make identical calls look different.
        first = next(iter(signature.parameters), None)
        receiver = first if first in ("self", "cls") else None

        def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            try:
                bound = dict(signature.bind_partial(*args, **kwargs).arguments)
            except TypeError:
                return {"args": list(args[1:] if receiver else args), "kwargs": kwargs}
            if receiver:
                bound.pop(receiver, None)
            return bound

        def before(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Decision, str]:
            run_id = current_run_id()
            decision = guard.check(tool, arguments(args, kwargs), run_id=run_id)
            record_decision(decision, tool)
            return decision, run_id

        def failed(decision: Decision, run_id: str, exc: Exception) -> None:
            guard.record(decision, f"{type(exc).__name__}: {exc}", False, run_id=run_id)

        def after(decision: Decision, run_id: str, result: Any) -> Any:
            decision = late_warning(guard, decision, guard.record(decision, result, True, run_id=run_id), tool)
            # Observe-only guards never change what the model reads.
            return nudge(result, decision.message) if decision.action == WARN and decision.enforced else result

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_inner(*args: Any, **kwargs: Any) -> Any:
                decision, run_id = before(args, kwargs)
                if decision.denied:
                    return decision.message
                try:
                    result = await fn(*args, **kwargs)
                except Exception as exc:
                    failed(decision, run_id, exc)
                    raise
                return after(decision, run_id, result)

            return async_inner  # type: ignore[return-value]

        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            decision, run_id = before(args, kwargs)
            if decision.denied:
                return decision.message
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                failed(decision, run_id, exc)
                raise
            return after(decision, run_id, result)

        return inner  # type: ignore[return-value]

    return wrap
