"""`error_streak`: decisions in a row whose tool calls failed.

Batch-aware: failed siblings of one decision are one sweep and count once.
Argument-aware: the reason says whether the streak is one action failing the
same way (a blind retry) or different attempts failing.
"""

from __future__ import annotations

from ..calls import ToolCall
from ..findings import Finding, finding
from ..policy import Policy
from .base import Latch, Step


class ErrorStreakDetector:
    def __init__(self, policy: Policy):
        self._rule = policy.error_streak
        self._reset()

    def _reset(self) -> None:
        self._count = 0
        self._decision = -1
        self._calls: list[ToolCall] = []
        self._signatures: set[tuple[str, object]] = set()
        self._latch = Latch()

    def observe(self, step: Step) -> list[Finding]:
        call = step.call
        if call.ok is None:
            return []  # unknown outcome: neither extends nor breaks the streak
        if call.ok:
            self._reset()
            return []
        if step.decision != self._decision:
            self._count += 1
            self._decision = step.decision
        if len(self._calls) < self._rule.stop_at * 4:
            self._calls.append(call)
        if len(self._signatures) < 2:
            self._signatures.add((call.action, call.result))
        level = self._latch.level(self._count, self._rule.warn_at, self._rule.stop_at)
        if level is None:
            return []
        return [self._finding(level)]

    def _finding(self, level: str) -> Finding:
        same = len(self._signatures) == 1
        detail = (
            "the same action failing with the same error each time"
            if same
            else f"across {len({c.action for c in self._calls})} different actions"
        )
        reason = (
            f"{self._count} decisions in a row ended in failed tool calls, {detail} "
            f"(warn at {self._rule.warn_at}, stop at {self._rule.stop_at})"
        )
        last = self._calls[-1]
        tool = last.tool if len({c.tool for c in self._calls}) == 1 else None
        return finding(
            "error_streak",
            level,
            self._calls,
            reason,
            count=len(self._calls),
            tool=tool,
            action=last.action if same else None,
        )
