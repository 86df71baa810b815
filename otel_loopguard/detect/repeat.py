"""`repeat`: the same action again, with no progress in between.

Consecutive mode (default) counts decisions in a row that requested the
action; a decision that requested something else, or a call that made
progress, starts the count again. Window mode counts the action's calls
without progress within the last `window` decisions. Siblings of one decision
never count twice: they are `parallel_duplicate`'s business.

Equivalence (consecutive mode, docs/equivalence.md): a call that brings nothing new and
whose arguments' sketch is at least `equivalence.similarity` alike to an action of the
previous decision (same tool) continues that action's count: a reworded query, a sub-agent
asked again with a new preamble. A decision whose calls were all rituals (a new action whose
answer only echoes its own arguments, `echo "trying again"`, or a shell no-op, `true`,
`cd <dir>`: conventions/shell.py) neither continues nor breaks a count: a no-op between two
tries of the looping call does not hide it. A new side effect
answered "ok" does break it (an edit between two runs of a check is work).
"""

from __future__ import annotations

from collections import deque
from typing import Optional


from ..bounded import BoundedMap
from ..calls import ToolCall
from ..canon.sketch import similarity
from ..findings import Finding, finding
from ..policy import Policy, RepeatRule
from ..progress import seen_equivalence
from .base import Latch, Step

MAX_WINDOW_ACTIONS = 1024
MAX_CARRIED = 64  # streaks carried across decisions of rituals only


class _Streak:
    __slots__ = ("decision", "calls", "count", "latch", "near")

    def __init__(self, decision: int, call: ToolCall):
        self.decision = decision
        self.calls: list[ToolCall] = [call]
        self.count = 1
        self.latch = Latch()
        self.near = False  # a near-duplicate of the action continued it


class RepeatDetector:
    kind = "repeat"

    def __init__(self, policy: Policy):
        self._policy = policy
        self._decision = 0
        self._current: dict[str, _Streak] = {}  # streaks touched in this decision
        self._previous: dict[str, _Streak] = {}  # ... and in the one before
        self._windows: BoundedMap[str, deque[tuple[int, ToolCall]]] = BoundedMap(MAX_WINDOW_ACTIONS)
        self._window_latches: BoundedMap[str, Latch] = BoundedMap(MAX_WINDOW_ACTIONS)
        self._rituals_only = False  # every call of the current decision so far was a ritual

    def observe(self, step: Step) -> list[Finding]:
        if step.decision != self._decision:
            # Only streaks alive in the previous decision can continue.
            fresh = step.decision == self._decision + 1
            self._previous = self._carried() if fresh else {}
            self._current = {}
            self._decision = step.decision
            self._rituals_only = True
        if self._rituals_only and not self._ritual(step):
            self._rituals_only = False
        if step.rule.exempt_repeat:
            return []
        rule = step.rule.repeat or self._policy.repeat  # = policy.repeat_for(tool): step.rule is the tool's
        if rule.mode == "window":
            return self._windowed(step, rule)
        return self._consecutive(step, rule)

    def _ritual(self, step: Step) -> bool:
        """A new action answering only its own words, or a shell no-op that succeeded."""
        eq = seen_equivalence(step.call, self._policy, step.rule)
        return (step.judgement.neutral and eq.echoed > 0) or (eq.noop and step.call.ok is not False)

    def preview(self, step: Step) -> Optional[tuple[str, str]]:
        """Before dispatch: the identical call this one would be, counting only calls that
        made no progress (its own result is not known yet)."""
        if step.rule.exempt_repeat:
            return None
        rule = self._policy.repeat_for(step.call.tool)
        count = self._would_count(step, rule)
        level = "stop" if count >= rule.stop_at else "warn" if count >= rule.warn_at else None
        if level is None:
            return None
        span = f"within {rule.window} decisions" if rule.mode == "window" else "in a row"
        results = " after calls that made no progress" if rule.progress_resets else ", whatever they returned"
        return level, (
            f"{step.call.tool} would be called {count} times {span} with the same arguments{results} "
            f"(warn at {rule.warn_at}, stop at {rule.stop_at})"
        )

    def _would_count(self, step: Step, rule: RepeatRule) -> int:
        action = step.call.action
        if rule.mode == "window":
            window = self._windows.get(action) or ()
            live = [d for d, _ in window if d > step.decision - rule.window]
            return 0 if live and live[-1] == step.decision else len(live) + 1
        if step.decision == self._decision:
            if action in self._current:
                return 0  # a sibling of a call this decision already made
            streak = self._previous.get(action)
        else:
            streak = self._carried().get(action) if step.decision == self._decision + 1 else None
        return streak.count + 1 if streak is not None else 1

    def _carried(self) -> dict[str, _Streak]:
        """The streaks the next decision may continue: this decision's, and when all its
        calls were rituals, the previous decision's too."""
        if not self._rituals_only or not self._previous:
            return self._current
        if len(self._previous) + len(self._current) > MAX_CARRIED:
            return self._current
        return {**self._previous, **self._current}

    def _consecutive(self, step: Step, rule: RepeatRule) -> list[Finding]:
        call = step.call
        if call.action in self._current:
            return []  # a sibling in the same decision
        streak = self._previous.get(call.action)
        if streak is None and not step.judgement.new_information:
            streak = self._near(step)
        if streak is None or (step.judgement.progressed and rule.progress_resets):
            streak = _Streak(step.decision, call)
        else:
            streak.count += 1
            if len(streak.calls) < rule.stop_at:
                streak.calls.append(call)
        streak.decision = step.decision
        self._current[call.action] = streak
        level = streak.latch.level(streak.count, rule.warn_at, rule.stop_at)
        if level is None:
            return []
        return [self._finding(level, streak.calls, streak.count, rule, "in a row", streak.near)]

    def _near(self, step: Step) -> _Streak | None:
        """The previous decision's streak of a near-duplicate of this call, if any: same tool,
        sketches at least the policy's similarity alike, not continued yet in this decision.
        Only for a call that brings nothing new and is no bare acknowledgement (distinct
        side effects answered "ok" are batch work, not a loop)."""
        call = step.call
        threshold = self._policy.equivalence_for(step.rule).similarity
        if threshold is None or call.equivalence.sketch is None or step.judgement.neutral or not self._previous:
            return None
        if seen_equivalence(call, self._policy, step.rule).ack:
            return None
        taken = {id(s) for s in self._current.values()}
        best, best_score = None, threshold
        for streak in self._previous.values():
            last = streak.calls[-1]
            if last.tool != call.tool or id(streak) in taken:
                continue
            score = similarity(last.equivalence.sketch, call.equivalence.sketch)
            if score >= best_score:
                best, best_score = streak, score
        if best is not None:
            best.near = True
        return best

    def _windowed(self, step: Step, rule: RepeatRule) -> list[Finding]:
        call = step.call
        window = self._windows.get(call.action)
        latch = self._window_latches.get(call.action) or Latch()
        if window is None or (step.judgement.progressed and rule.progress_resets):
            window, latch = deque(), Latch()
        elif window and window[-1][0] == step.decision:
            return []  # a sibling in the same decision
        window.append((step.decision, call))
        while window[0][0] <= step.decision - rule.window:
            window.popleft()
        self._windows.put(call.action, window)
        self._window_latches.put(call.action, latch)
        if len(window) < rule.warn_at:
            latch = Latch()  # fell back below the threshold: may warn again later
            self._window_latches.put(call.action, latch)
        level = latch.level(len(window), rule.warn_at, rule.stop_at)
        if level is None:
            return []
        calls = [c for _, c in window]
        return [self._finding(level, calls, len(calls), rule, f"within {rule.window} decisions")]

    def _finding(
        self, level: str, calls: list[ToolCall], count: int, rule: RepeatRule, span: str, near: bool = False
    ) -> Finding:
        tool = calls[-1].tool
        same = "the same or near-identical arguments" if near else "the same arguments"
        results = " and no progress" if rule.progress_resets else ", whatever they returned"
        reason = (
            f"{tool} was called {count} times {span} with {same}{results} "
            f"(warn at {rule.warn_at}, stop at {rule.stop_at})"
        )
        return finding("repeat", level, calls, reason, count=count, tool=tool, action=calls[-1].action)


