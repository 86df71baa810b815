"""Enforce mode: the guard, consulted before dispatch, and its adapters.

    guard = otel_loopguard.guard()          # uses OTEL_LOOPGUARD_KEY / policy like install()

    @guard.tool
    def lookup_order(order_id: str) -> dict: ...
"""

from __future__ import annotations

import os
from typing import Any, Callable, ContextManager, Iterable, Optional, Sequence, TypeVar

from ..mode import ENV as MODE_ENV
from ..mode import GuardMode, ModeError
from .decorator import current_run_id, guarded, nudge, record_decision, run_scope, scoped_run_id
from .guard import ALLOW, DENY, WARN, WRAP_UP, Decision, Guard, Stop


T = TypeVar("T")


class ToolGuard(Guard):
    """A Guard with the decorator attached: `@guard.tool` or `@guard.tool(name=...)`."""

    def tool(self, fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None) -> Any:
        if fn is None:
            return guarded(self, name)
        return guarded(self, name)(fn)

    def run(self, run_id: Optional[str] = None) -> ContextManager[str]:
        """`with guard.run("ticket-42"):` — the calls inside are one run, whatever the trace
        (a new id when none is given); for code without a trace, where every call would
        otherwise share the process-wide run "local"."""
        return run_scope(run_id)

    def stopped(self, run_id: Optional[str] = None) -> Optional[Stop]:
        """Did the guard stop the run? The current trace's run (as the decorator judges it)
        unless `run_id` is given; None while it goes on."""
        return super().stopped(run_id or current_run_id())

    def wrap_up(self, answer: Callable[[str], T]) -> T:
        """Seed 001's wrap-up for a loop the application owns: `answer(WRAP_UP)` makes the one
        tool-free model turn (tools disabled through the provider's setting), its result is
        returned as the partial result, and `loop_guard` is recorded as the run's ending on the
        current span (call it inside the run's span)."""
        from .termination import record_termination

        result = answer(WRAP_UP)
        record_termination("loop_guard")
        return result


GUARD_ARGUMENTS = ("mode", "policy", "key", "key_file", "enforce")


def make_guard(*, mode: Optional[str] = None, policy: Optional[str | os.PathLike[str]] = None,
               key: Optional[bytes | str] = None, key_file: Optional[str] = None,
               enforce: Optional[bool] = None, clock: Optional[Callable[[], int]] = None) -> ToolGuard:
    """The guard with the settings install() uses: the argument, else OTEL_LOOPGUARD_POLICY
    and OTEL_LOOPGUARD_KEY[_FILE]. Both must agree, or the guard judges by other rules than
    the processor that records its decisions.

    `mode` ("enforce" or "observe"), else OTEL_LOOPGUARD_MODE, else install(mode=...), else
    enforce; asked again at every check (mode.py). `enforce=True|False` is the older spelling
    of an explicit mode. `clock` (nanoseconds, for tests; not an argument of guard()) times
    calls for the wall-time budget."""
    from ..canon import load_key
    from ..policy_source import PolicySource
    from ..processor.config import resolve  # the variables read exactly as install() reads them

    if enforce is not None:
        spelled = "enforce" if enforce else "observe"
        if mode is not None and mode != spelled:
            raise ModeError(f"guard(): mode={mode!r} contradicts enforce={enforce!r}; pass only mode")
        mode = spelled
    requested = GuardMode(mode)  # a bad mode stops here, naming the argument or OTEL_LOOPGUARD_MODE
    digest_key = load_key(key=key, key_file=key_file) if (key or key_file) else load_key()
    # The mode was settled above (GuardMode: a ModeError naming the variable); the other
    # variables are read as install() reads them.
    settings = resolve({"policy": policy}, env={k: v for k, v in os.environ.items() if k != MODE_ENV})
    source = PolicySource(digest_key, settings.policy, settings.policy_reload_seconds)
    if clock is not None:
        return ToolGuard(source, mode=requested, clock=clock)
    return ToolGuard(source, mode=requested)


def check_arguments(function: str, given: Iterable[str], known: Sequence[str]) -> None:
    """A clear error for an argument the function does not take (a typo must not pass)."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(f"{function}: unknown argument{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(unknown)}; it takes {', '.join(known)} (docs/guard.md)")


__all__ = ["ALLOW", "DENY", "WARN", "WRAP_UP", "Decision", "Stop", "GUARD_ARGUMENTS", "Guard", "ToolGuard", "check_arguments", "current_run_id",
           "guarded", "make_guard", "nudge", "record_decision", "run_scope", "scoped_run_id"]
