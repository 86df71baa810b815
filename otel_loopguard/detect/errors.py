"""`error_streak`: decisions in a row whose tool calls failed.

Batch-aware: failed siblings of one decision are one sweep and count once, and
a decision with any successful call is not a failed one, whatever the order of
its siblings. Argument-aware: the reason says whether one action kept failing
the same way (a blind retry) or different attempts failed. With `same_tool`, a
failure of another tool starts a new streak (seed 001's rule). A call whose result reports
a failure (an exit code, an error field: docs/equivalence.md) arrives here as failed, and
errors that differ only in volatile fragments (times, pids) are "the same error". An exit
status that reports a failure for an action the run never called before is held back: an answer (grep's "no
match", a pipeline's exit status over valid output) unless the same action fails next, which
counts both; anything else drops it, so distinct commands answering with an exit status
never make a streak. A success of another action that brings nothing new (the answer the run
already had: a re-read of an unchanged file between failed edits) neither extends nor breaks
a streak; the failing action itself succeeding is a recovery, and ends it.
"""

from __future__ import annotations

from typing import Optional

from ..bounded import BoundedSet
from ..calls import ToolCall
from ..conventions.failures import exit_status
from ..findings import Finding, finding
from ..policy import Policy
from .base import Latch, Step


MAX_CALLED_ACTIONS = 4096  # forgetting one can only hide a finding, never invent one


class ErrorStreakDetector:
    def __init__(self, policy: Policy):
        self._policy = policy
        self._rule = policy.error_streak
        self._same_tool = policy.error_streak.same_tool
        self._reset()
        self._decision = -1
        self._decision_ok = False
        self._called = BoundedSet(MAX_CALLED_ACTIONS)  # actions seen in the run, any outcome
        self._held: Optional[tuple[Step, ToolCall]] = None  # a new action's reported failure

    def _reset(self) -> None:
        self._count = 0
        self._counted = -1  # the last decision counted into the streak
        self._calls: list[ToolCall] = []
        self._actions: set[str] = set()
        self._errors: set[object] = set()
        self._latch = Latch()

    def observe(self, step: Step) -> list[Finding]:
        call = step.call
        if step.decision != self._decision:
            self._decision, self._decision_ok = step.decision, False
        first_time = self._called.add(call.action)
        if call.ok is None:
            return []  # unknown outcome: neither extends nor breaks the streak
        if call.ok and self._count and call.action not in self._actions and _brings_nothing(step):
            return []  # another call repeating an earlier answer changes nothing: no break
        held, self._held = self._held, None
        if call.ok is False and first_time and exit_status(call.equivalence.failed) and not self._decision_ok:
            self._held = (step, call)  # a new action's reported failure: an answer until retried
            return []
        if held is not None and call.ok is False and held[1].action == call.action:
            self._count_failure(*held)
        if call.ok:
            self._decision_ok = True
            if self._count or self._calls:  # most calls succeed: nothing to clear, nothing built
                self._reset()
            return []
        if self._decision_ok:
            return []  # a sibling succeeded: this decision is not a failed sweep
        self._count_failure(step, call)
        level = self._latch.level(self._count, self._rule.warn_at, self._rule.stop_at)
        if level is None:
            return []
        return [self._finding(level)]

    def _count_failure(self, step: Step, call: ToolCall) -> None:
        if self._same_tool and self._calls and self._calls[-1].tool != call.tool:
            self._reset()  # another tool failing starts its own streak
        if self._counted != step.decision:
            self._count += 1
            self._counted = step.decision
        if len(self._calls) < self._rule.stop_at * 4:
            self._calls.append(call)
        if len(self._actions) < 2:
            self._actions.add(call.action)
        if len(self._errors) < 2:
            shape = call.equivalence.shape if self._policy.equivalence_for(step.rule).shape else None
            self._errors.add((call.action, shape or call.result))  # noise aside

    def _finding(self, level: str) -> Finding:
        one_action = len(self._actions) == 1
        if one_action and len(self._errors) == 1:
            detail = "the same action failing with the same error each time"
        elif one_action:
            detail = "the same action failing with changing errors"
        else:
            detail = f"across {len({c.action for c in self._calls})} different actions"
        reason = (
            f"{self._count} decisions in a row ended in failed tool calls, {detail} "
            f"(warn at {self._rule.warn_at}, stop at {self._rule.stop_at})"
        )
        last = self._calls[-1]
        tool = last.tool if len({c.tool for c in self._calls}) == 1 else None
        action = last.action if one_action else None
        return finding("error_streak", level, self._calls, reason, count=len(self._calls), tool=tool, action=action)


def _brings_nothing(step: Step) -> bool:
    """A successful call that brought nothing new to the run (a re-read of an unchanged file
    between two failed edits): it neither extends nor breaks a streak. A new action's
    acknowledgement (`neutral`: an edit answered "applied") is work, and breaks it."""
    j = step.judgement
    return not j.new_information and not j.neutral and not j.terminal
