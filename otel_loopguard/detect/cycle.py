"""`cycle`: a block of 2..4 different calls repeated, outcomes included.

For each period p we keep how many calls in a row matched the call p places
earlier (same action, same result, same outcome; with `compare: actions`, the
same action alone). p matched calls in a row complete one more repetition, so
the check per call is O(max_period).

Results are compared by default because alternating calls are often work: a
read-modify-write loop over a counter, a poll-then-fetch pair whose answers move,
an edit-then-test pair whose test output changes. Their actions repeat, their
results do not (docs/policy.md, "Why `cycle.compare` defaults to `results`"). A result is compared in its shape form (volatile
fragments inside text masked, docs/equivalence.md): a failing pair whose log lines differ
only in their timestamps is the same pair.
"""

from __future__ import annotations

from collections import deque
from typing import Optional

from ..calls import ToolCall
from ..findings import Finding, finding
from ..policy import Policy
from .base import Latch, Step


class CycleDetector:
    kind = "cycle"

    def __init__(self, policy: Policy):
        self._rule = policy.cycle
        self._by_results = policy.cycle.compare == "results"
        self._policy = policy
        self._matched = dict.fromkeys(range(self._rule.min_period, self._rule.max_period + 1), 0)
        # A period's latch exists once it may fire: absent and fresh mean the same (most
        # runs never repeat a block, and every run starts a detector).
        self._latches: dict[int, Latch] = {}
        self._recent: deque[tuple[tuple[str, object, object], ToolCall]] = deque(
            maxlen=self._rule.max_period * self._rule.stop_at
        )

    def observe(self, step: Step) -> list[Finding]:
        call = step.call
        if self._by_results:
            shape = call.equivalence.shape if self._policy.equivalence_for(step.rule).shape else None
            sig: tuple[str, object, object] = (call.action, shape or call.result, call.ok)
        else:
            sig = (call.action, None, None)
        recent = self._recent
        matched = self._matched
        repeating = False
        for p in matched:
            if len(recent) >= p and recent[-p][0] == sig:
                matched[p] += 1
                repeating = True
            elif matched[p] or p in self._latches:  # a fresh latch only when one may have fired
                matched[p] = 0
                self._latches.pop(p, None)
        recent.append((sig, call))
        if not repeating:
            return []  # every count is back to 0: no period can have repeated (most calls)
        period = self._shortest_repeating_period()
        if period is None:
            return []
        reps = self._matched[period] // period + 1
        latch = self._latches.get(period) or self._latches.setdefault(period, Latch())
        level = latch.level(reps, self._rule.warn_at, self._rule.stop_at)
        if level is None:
            return []
        calls = [c for _, c in list(recent)[-reps * period :]]
        tools = " -> ".join(c.tool for c in calls[:period])
        reason = (
            f"the same {period}-call pattern ({tools}) repeated {reps} times{self._same()} "
            f"(warn at {self._rule.warn_at}, stop at {self._rule.stop_at} repetitions)"
        )
        return [finding("cycle", level, calls, reason)]

    def preview(self, step: Step) -> Optional[tuple[str, str]]:
        """Before dispatch: the repetition this call would complete if it returns what the
        call one period earlier returned, as that call did before it (its own result is not
        known yet: the same assumption the repeat preview makes). Announces every stop;
        the first warn, which needs one call of evidence less, comes from observe()."""
        action, recent, rule = step.call.action, self._recent, self._rule
        for p, matched in self._matched.items():  # shortest period first, as observe() picks
            if len(recent) < p or recent[-p][0][0] != action:
                continue
            # The call one period back must itself have repeated its predecessor: an action
            # whose own results keep changing is not announced as continuing the pattern.
            if matched < p or not self._would_vary(p, action):
                continue
            reps = (matched + 1) // p + 1
            level = "stop" if reps >= rule.stop_at else "warn" if reps >= rule.warn_at else None
            if level is None:
                return None
            tools = " -> ".join(c.tool for _, c in list(recent)[-p + 1 :]) + f" -> {step.call.tool}"
            return level, (
                f"this call would complete {reps} repetitions of the {p}-call pattern ({tools})"
                f"{self._same()} (warn at {rule.warn_at}, stop at {rule.stop_at} repetitions)"
            )
        return None

    def _same(self) -> str:
        return " with the same results" if self._by_results else " with the same arguments"

    def _would_vary(self, p: int, action: str) -> bool:
        block = list(self._recent)[-(p - 1) :]
        return any(sig[0] != action for sig, _ in block)

    def _shortest_repeating_period(self) -> int | None:
        for p, matched in self._matched.items():
            if matched >= p and self._block_varies(p):
                return p
        return None

    def _block_varies(self, p: int) -> bool:
        # One action repeated is the repeat detector's case, not a cycle.
        block = list(self._recent)[-p:]
        return len({sig[0] for sig, _ in block}) > 1
