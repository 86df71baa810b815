"""`poll_budget`: total polls of one action and a deadline, for declared pollers.

Kept apart from unchanged observations: a poller that reports progress on every
call still runs out of polls or time. Reaching a terminal state ends the episode.
"""

from __future__ import annotations

from typing import Optional

from ..bounded import BoundedMap
from ..calls import ToolCall
from ..findings import Finding, finding
from ..policy import Policy, PollRule, ToolRule
from .base import Latch, Step
from .budgets import warn_at

MAX_EPISODES = 256


class _Episode:
    __slots__ = ("first", "count", "latch", "deadline_hit")

    def __init__(self, first: ToolCall):
        self.first = first
        self.count = 0
        self.latch = Latch()
        self.deadline_hit = False


class PollBudgetDetector:
    kind = "poll_budget"

    @staticmethod
    def applies(rule: ToolRule) -> bool:
        return rule.poll is not None  # only tools with a poll rule are polls
    def __init__(self, policy: Policy):
        self._ratio = policy.budget.warn_ratio
        self._episodes: BoundedMap[str, _Episode] = BoundedMap(MAX_EPISODES)

    def observe(self, step: Step) -> list[Finding]:
        rule = step.rule.poll
        if rule is None:
            return []
        call = step.call
        if step.judgement.terminal:
            self._episodes.pop(call.action)  # done in time: the next poll starts a new episode
            return []
        episode = self._episodes.get(call.action) or _Episode(call)
        episode.count += 1
        self._episodes.put(call.action, episode)
        return self._count_check(episode, rule, call) + self._deadline_check(episode, rule, call)

    def preview(self, step: Step) -> Optional[tuple[str, str]]:
        """Before dispatch, from warn_ratio of the poll budget on: where this poll stands. Its
        stop needs the poll's own outcome (a terminal state ends the episode), so it comes
        from the run's stop after the poll that used the budget up."""
        rule = step.rule.poll
        if rule is None or rule.max_polls is None:
            return None
        episode = self._episodes.get(step.call.action)
        count = (episode.count if episode is not None else 0) + 1
        if warn_at(rule.max_polls, self._ratio) <= count <= rule.max_polls:
            return "warn", (f"this is poll {count} of the {rule.max_polls} {step.call.tool} may make "
                            "without reaching a terminal state")
        return None

    def _count_check(self, ep: _Episode, rule: PollRule, call: ToolCall) -> list[Finding]:
        if rule.max_polls is None:
            return []
        level = ep.latch.level(ep.count, warn_at(rule.max_polls, self._ratio), rule.max_polls)
        if level is None:
            return []
        reason = f"{call.tool} polled {ep.count} times without reaching a terminal state (budget {rule.max_polls} polls)"
        return [self._finding(level, ep, call, reason)]

    def _deadline_check(self, ep: _Episode, rule: PollRule, call: ToolCall) -> list[Finding]:
        elapsed = _elapsed(ep.first, call)
        if rule.deadline_seconds is None or elapsed is None or ep.deadline_hit:
            return []
        if elapsed < rule.deadline_seconds:
            return []
        ep.deadline_hit = True
        reason = f"{call.tool} kept polling for {elapsed:.1f}s, past its {rule.deadline_seconds:g}s deadline"
        return [self._finding("stop", ep, call, reason)]

    def _finding(self, level: str, ep: _Episode, call: ToolCall, reason: str) -> Finding:
        calls = [ep.first, call] if ep.first is not call else [call]
        return finding("poll_budget", level, calls, reason, count=ep.count, tool=call.tool, action=call.action)


def _elapsed(first: ToolCall, call: ToolCall) -> Optional[float]:
    if not first.start_ns or not call.end_ns:
        return None
    return (call.end_ns - first.start_ns) / 1e9
