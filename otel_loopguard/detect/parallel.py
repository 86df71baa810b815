"""`parallel_duplicate`: identical sibling calls requested by one decision.

Wasteful, not a reasoning loop: reported as info, never as `repeat`.
"""

from __future__ import annotations

from ..calls import ToolCall
from ..findings import INFO, Finding, finding
from ..policy import Policy
from .base import Step


class ParallelDuplicateDetector:
    def __init__(self, policy: Policy):
        self._decision = -1
        self._siblings: dict[str, list[ToolCall]] = {}

    def observe(self, step: Step) -> list[Finding]:
        if step.decision != self._decision:
            self._decision, self._siblings = step.decision, {}
        calls = self._siblings.setdefault(step.call.action, [])
        calls.append(step.call)
        if len(calls) != 2:
            return []
        tool = step.call.tool
        reason = f"one decision requested {tool} twice with the same arguments in parallel"
        return [finding("parallel_duplicate", INFO, calls, reason, tool=tool, action=step.call.action)]
