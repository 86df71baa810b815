"""`no_progress`: decisions in a row whose calls brought nothing new to the run.

New information is a result digest never seen before in the run, or declared
progress (docs/policy.md#progress). A decision counts once, however many
siblings it requested; a sibling with new information clears the streak.
Pollers are left to `poll_budget`: they neither extend nor break it, and so does a new
action's bare acknowledgement (an empty success, an echo: `Judgement.neutral`): distinct
side effects that each answer "ok" are work whose results say nothing (docs/equivalence.md).
A shell no-op (`true`, `echo "done"`, `cd <dir>`: conventions/shell.py) counts as a decision
that brings nothing; a streak made of no-ops alone ends at such work: `cd <dir>` before a
command there is preparation, not a loop.
"""

from __future__ import annotations

from ..calls import ToolCall
from ..findings import Finding, finding
from ..policy import Policy
from .base import Latch, Step


class NoProgressDetector:
    def __init__(self, policy: Policy):
        self._rule = policy.no_progress
        self._calls: list[ToolCall] = []
        self._count = 0
        self._latch = Latch()
        self._decision = -1
        self._noops = 0  # no-ops in the streak

    def observe(self, step: Step) -> list[Finding]:
        if step.judgement.neutral and self._count and self._noops == self._count:
            self._calls, self._count, self._noops, self._latch = [], 0, 0, Latch()  # work after no-ops only
        if step.rule.poll is not None or step.call.result is None or step.judgement.neutral:
            return []
        if step.judgement.new_information:
            if self._count:  # a streak to end (most calls with new information had none)
                self._calls, self._count, self._noops, self._latch = [], 0, 0, Latch()
            self._decision = step.decision  # later siblings of this decision stay clear
            return []
        if step.decision == self._decision:
            return []
        self._decision = step.decision
        self._count += 1
        self._noops += step.call.equivalence.noop
        if len(self._calls) < self._rule.stop_at:
            self._calls.append(step.call)
        level = self._latch.level(self._count, self._rule.warn_at, self._rule.stop_at)
        if level is None:
            return []
        reason = (
            f"{self._count} decisions in a row returned only results already seen in this run "
            f"(warn at {self._rule.warn_at}, stop at {self._rule.stop_at})"
        )
        return [finding("no_progress", level, self._calls, reason, count=self._count)]
