"""The steps a tool-wrapper adapter takes around one call (smolagents, LlamaIndex): the guard
asked first, a denial answered in place of the tool, the call recorded after it ran.

Where the framework offers no hook on the model's request, the wrap-up travels with the
denial: once the guard has stopped the run, every denial ends with seed 001's wrap-up
instruction, so the model's next request carries it last; `loop_guard` is recorded as the
run's ending the first time (docs/guard.md, "Wrap-up").
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Optional

from ..bounded import BoundedSet
from .decorator import current_run_id, late_warning, nudge, record_decision
from .guard import MAX_RUNS, WARN, WRAP_UP, Decision, Guard
from .termination import record_termination

# Runs whose wrap-up was sent, per guard: every wrapped tool of a run shares them.
_WRAPPED_UP: "weakref.WeakKeyDictionary[Guard, BoundedSet]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


class GuardedCall:
    """One call of a wrapped tool: `check()` before it runs, then `denied()`, or `failed()` /
    `succeeded()` once it ran."""

    __slots__ = ("guard", "tool", "run_id", "decision")

    def __init__(self, guard: Guard, tool: str, arguments: Any,
                 turn: Optional[Callable[[str], Optional[int]]] = None):
        """`turn(run_id)`: the model response the call answers, when the adapter knows it
        (calls of one response are siblings, never a repeat of each other)."""
        self.guard = guard
        self.tool = tool
        self.run_id = current_run_id()  # `with guard.run(...)`, else the trace, else "local"
        self.decision: Decision = guard.check(tool, arguments, run_id=self.run_id,
                                              turn=turn(self.run_id) if turn is not None else None)
        record_decision(self.decision, tool)  # before the framework opens the tool's span

    @property
    def denied(self) -> bool:
        return self.decision.denied

    def denial(self) -> str:
        """What the model reads instead of the tool's result; with the wrap-up once the run is
        stopped."""
        if self.guard.stopped(self.run_id) is None:
            return self.decision.message
        with _LOCK:
            first = _WRAPPED_UP.setdefault(self.guard, BoundedSet(MAX_RUNS)).add(self.run_id)
        if first:
            record_termination("loop_guard")
        return f"{self.decision.message}\n\n{WRAP_UP}"

    def failed(self, error: Any) -> None:
        text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
        self.guard.record(self.decision, text, False, run_id=self.run_id)

    def succeeded(self, result: Any) -> Any:
        """Records the result; returns it, nudged when the guard warns (a string or a dict)."""
        found = self.guard.record(self.decision, result, True, run_id=self.run_id)
        decision = late_warning(self.guard, self.decision, found, self.tool)
        if decision.action == WARN and decision.enforced:  # observe-only guards change nothing
            return nudge(result, decision.message)
        return result
