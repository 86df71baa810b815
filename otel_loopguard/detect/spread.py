"""`cycle`, loose: the same action giving the same answer again, at least every other decision,
whatever comes between.

`repeat` counts calls in a row, and a call between two tries starts it again (seed 000: an
intermediate call may be a legitimate attempt to gather context). `cycle` needs the whole
block to repeat. Neither sees a failing test re-run between reads of ever new files, or the
same write on both sides of one read: one call of anything between two tries does not make
the same answer new. This broader rule says so, as a `cycle` finding that names the calls
between, and only at the repeat stop count (`repeat.stop_at`, the tool's): it never warns, so
the in-a-row and block rules keep their early, easy-to-explain findings.

Not reported: calls in a row (`repeat`'s) and a strict alternation with one other call giving
one answer (`cycle`'s). Not counted: a call that brought something new (it starts the count again), an answer with
no content (a `sleep` between polls is a cadence), and a count across a new side effect
answered "ok" (work that may have changed what the next try sees). Off for a tool whose
policy says `loose_cycle: false`, as for one exempt from `repeat`. O(1) per call; at most
MAX_ACTIONS actions tracked.
"""

from __future__ import annotations

from typing import Optional

from ..bounded import BoundedMap
from ..calls import ToolCall
from ..findings import Finding, finding
from ..policy import Policy
from ..progress import seen_equivalence
from .base import Latch, Step

MAX_ACTIONS = 1024
MAX_GAP = 2  # decisions from one try to the next: at most one decision between
# The fewest same answers it stops on: the default repeat stop. A policy that tightens
# `repeat` (seed 000 allows two) keeps its in-a-row semantics; one that loosens it loosens this.
MIN_STOP_AT = 5


class _Spread:
    __slots__ = ("decision", "calls", "between", "answers", "gaps", "count", "latch")

    def __init__(self, decision: int, call: ToolCall):
        self.decision = decision
        self.calls: list[ToolCall] = [call]
        self.between: set[str] = set()  # tools called between the tries (at most a few kept)
        self.answers: set[tuple[str, object]] = set()  # (action, answer) between, at most two kept
        self.gaps = 0  # tries that came after another call
        self.count = 1
        self.latch = Latch()

    def note_between(self, last: ToolCall) -> None:
        self.gaps += 1
        if len(self.between) < 4:
            self.between.add(last.tool)
        if len(self.answers) < 2:
            self.answers.add((last.action, last.equivalence.shape or last.result))

    def strict_alternation(self) -> bool:
        """Every call between was one action giving one answer: a block of two repeated,
        which `cycle` itself judges."""
        return self.gaps >= 2 and len(self.answers) == 1


class SpreadDetector:
    kind = "cycle"

    def __init__(self, policy: Policy):
        self._policy = policy
        self._spreads: BoundedMap[str, _Spread] = BoundedMap(MAX_ACTIONS)
        self._last_work = 0  # the last decision with a new side effect answered "ok"
        self._last: Optional[ToolCall] = None

    def observe(self, step: Step) -> list[Finding]:
        call, last = step.call, self._last
        self._last = call
        judgement = step.judgement
        if judgement.neutral:
            eq = seen_equivalence(call, self._policy, step.rule)
            if not eq.echoed:
                self._last_work = step.decision  # work, not a ritual that echoes its own words
            return []
        rule = step.rule.repeat or self._policy.repeat
        if step.rule.exempt_repeat or not step.rule.loose_cycle or not rule.progress_resets or rule.mode == "window":
            return []
        if seen_equivalence(call, self._policy, step.rule).ack:
            return []  # no content: a wait or an "ok" between polls is a cadence
        spread = self._spreads.get(call.action)
        if (judgement.new_information or spread is None or step.decision - spread.decision > MAX_GAP
                or self._last_work > spread.decision):
            self._spreads.put(call.action, _Spread(step.decision, call))
            return []
        if spread.decision == step.decision:
            return []  # a sibling in the same decision
        spread.decision = step.decision
        spread.count += 1
        if len(spread.calls) < max(rule.stop_at, MIN_STOP_AT):
            spread.calls.append(call)
        if last is not None and last.action != call.action:
            spread.note_between(last)
        stop_at = max(rule.stop_at, MIN_STOP_AT)
        if not spread.gaps or spread.count < stop_at or spread.latch.stopped or spread.strict_alternation():
            return []  # in a row: `repeat` says it; a strict alternation: `cycle` does
        spread.latch.stopped = spread.latch.warned = True
        return [self._finding(spread, stop_at)]

    @staticmethod
    def _finding(spread: _Spread, stop_at: int) -> Finding:
        tool = spread.calls[-1].tool
        between = ", ".join(sorted(spread.between))
        reason = (f"{tool} gave the same answer {spread.count} times with the same arguments, at least every "
                  f"other decision, with other calls between ({between}) (stop at {stop_at})")
        return finding("cycle", "stop", spread.calls, reason, count=spread.count, tool=tool,
                       action=spread.calls[-1].action)
