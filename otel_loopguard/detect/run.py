"""One run's incremental state: numbers decisions, judges progress, fans out.

Calls must arrive in sequence order (the shells order them). Each call costs
O(1) amortised across all detectors, and memory per run is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, cast

from ..bounded import BoundedSet
from ..calls import ModelCall, ToolCall
from ..findings import INTEGRITY_KINDS, STOP, TOOL_LEVEL_KINDS, Finding
from ..policy import Policy, ToolRule
from ..progress import Judgement, ProgressTracker
from .base import Detector, Preview, Step
from .budgets import BudgetDetector, ToolCapDetector
from .cycle import CycleDetector
from .errors import ErrorStreakDetector
from .novelty import NoProgressDetector
from .parallel import ParallelDuplicateDetector
from .polling import PollBudgetDetector
from .repeat import RepeatDetector
from .spread import SpreadDetector
from .writes import DuplicateWriteDetector

DETECTORS = (
    RepeatDetector,
    CycleDetector,
    ErrorStreakDetector,
    NoProgressDetector,
    BudgetDetector,
    ToolCapDetector,
    PollBudgetDetector,
    DuplicateWriteDetector,
    ParallelDuplicateDetector,
    SpreadDetector,
)


# Patterns whose evidence is calls in a row: a gap in the sequence breaks them (the missing
# call may have been another action, an error, or new information). Budgets, caps, polls
# and duplicate writes count totals, which a gap does not break.
_STREAKS = frozenset({RepeatDetector, CycleDetector, ErrorStreakDetector, NoProgressDetector,
                      ParallelDuplicateDetector, SpreadDetector})

MAX_DISTINCT_ACTIONS = 16384
STOPPED_EARLIER = "the run was stopped earlier: "
# Positions in DETECTORS, worked out once rather than searched for in every new run.
_BUDGET = DETECTORS.index(BudgetDetector)
_PREVIEWS = tuple(i for i, cls in enumerate(DETECTORS) if hasattr(cls, "preview"))


def stops_run(f: Finding) -> bool:
    """A stop-level finding that stops the whole run: not a trace's integrity (the telemetry,
    not the agent), not a per-tool cap (it refuses that tool only)."""
    return f.severity == STOP and f.kind not in INTEGRITY_KINDS and f.kind not in TOOL_LEVEL_KINDS


def _ALWAYS(rule: ToolRule) -> bool:  # noqa: N802 - a constant predicate
    return True


@dataclass
class RunSummary:
    """Counts the score needs, kept as calls arrive (the same in every shell)."""

    tool_calls: int = 0
    distinct_actions: int = 0  # exact while the run has at most MAX_DISTINCT_ACTIONS
    progress_observed: bool = False  # a repeated action made progress
    new_items_observed: bool = False  # declared item ids, or a second distinct result
    first_result: Optional[str] = None


class OutOfOrderError(ValueError):
    """A shell fed a call whose sequence is not after the previous one."""


class Run:
    """Detector state for one run (one trace, or one conversation)."""

    def __init__(self, run_id: str, policy: Policy):
        self.run_id = run_id
        self.policy = policy
        self.progress = ProgressTracker(policy)
        self._detectors: list[Detector] = [cls(policy) for cls in DETECTORS]
        self._budget: BudgetDetector = self._detectors[_BUDGET]  # type: ignore[assignment]
        self.decision = 0
        self._last_turn: Optional[int] = None
        self.last_call: Optional[ToolCall] = None
        self.summary = RunSummary()
        self.stopped: Optional[Finding] = None  # the first stop-level finding, if any
        self._previews = cast("list[Preview]", [self._detectors[i] for i in _PREVIEWS])
        self._actions = BoundedSet(MAX_DISTINCT_ACTIONS)
        self._by_rule: dict[int, tuple[Callable[[Step], list[Finding]], ...]] = {}

    def observe(self, call: ToolCall) -> list[Finding]:
        """Feed the next call; returns the findings whose evidence it completes."""
        return self.observe_judged(call)[0]

    def observe_judged(self, call: ToolCall) -> tuple[list[Finding], Judgement]:
        if self.last_call is not None and call.seq <= self.last_call.seq:
            raise OutOfOrderError(
                f"run {self.run_id}: call {call.seq} arrived after call {self.last_call.seq}"
            )
        if call.turn is None or call.turn != self._last_turn:
            self.decision += 1  # no turn known: every call is its own decision
        self._last_turn = call.turn
        rule = self.policy.rule(call.tool)
        judgement = self.progress.judge(call, rule)
        step = Step(call=call, decision=self.decision, judgement=judgement, rule=rule)
        self.last_call = call
        self._summarise(call, judgement)
        observers = self._by_rule.get(id(rule))
        if observers is None:
            observers = self._fanout(rule)
        found: list[Finding] = []
        for observe in observers:
            new = observe(step)
            if new:  # most calls find nothing in most detectors
                found += new
        return self._stamp(found), judgement

    def gap(self) -> None:
        """Calls went missing before the next one: patterns of calls in a row start afresh,
        so no finding claims a streak across evidence that is not there. Totals go on."""
        self._detectors = [cast(Detector, cls(self.policy)) if cls in _STREAKS else d
                           for cls, d in zip(DETECTORS, self._detectors)]
        self._previews = cast("list[Preview]", [self._detectors[i] for i in _PREVIEWS])
        self._by_rule = {}
        self._last_turn = None

    def _fanout(self, rule: ToolRule) -> tuple[Callable[[Step], list[Finding]], ...]:
        """The detectors that can judge calls under this rule. Some only ever judge a few
        tools (a poll rule, a side effect, a call cap); an ordinary call skips them.
        Keyed by the rule object: the policy holds one per configured tool, plus a default."""
        observers = tuple(d.observe for d in self._detectors if getattr(d, "applies", _ALWAYS)(rule))
        self._by_rule[id(rule)] = observers
        return observers

    def _summarise(self, call: ToolCall, judgement: Judgement) -> None:
        s = self.summary
        s.tool_calls += 1
        if self._actions.add(hash(call.action)):  # an int is a quarter of the digest's size
            s.distinct_actions += 1
        else:
            s.progress_observed |= judgement.progressed
        s.new_items_observed |= judgement.new_items > 0
        if call.result is not None:
            if s.first_result is None:
                s.first_result = call.result
            elif judgement.novel_result:  # a second distinct result (masked values aside, per action)
                s.new_items_observed = True

    def preview(self, call: ToolCall) -> list[tuple[str, str, str]]:
        """Before dispatch, without changing any state: (severity, kind, reason) for each
        threshold that running `call` would cross, judged on the calls already observed.
        Calls already stopped by a stop-level finding stay stopped."""
        decision = self.decision if call.turn is not None and call.turn == self._last_turn else self.decision + 1
        no_result = Judgement(progressed=False, novel_result=False, new_items=0, terminal=False)
        step = Step(call=call, decision=decision, judgement=no_result, rule=self.policy.rule(call.tool))
        out = [(level, d.kind, reason) for d in self._previews if (p := d.preview(step)) for level, reason in (p,)]
        if self.stopped is not None and not self._budget.in_last_turn(self.stopped, call.turn):
            out.append(("stop", self.stopped.kind, f"{STOPPED_EARLIER}{self.stopped.reason}"))
        return out

    def denied(self, call: ToolCall, kind: str, reason: str) -> None:
        """A guard refused `call` on a stop-level preview: the run is stopped from here on,
        as if the call had run and crossed the threshold (it never runs, so observe() never
        sees it; without this a pattern such as a cycle would resume at the next call)."""
        self._budget.refused(call.turn)
        if kind in TOOL_LEVEL_KINDS:
            return  # a capped tool is refused again by its own preview; the run goes on
        if self._may_stop() and not reason.startswith(STOPPED_EARLIER):  # else: stopped by that already
            f = Finding(kind=kind, severity=STOP, first_seq=call.seq, last_seq=call.seq, count=1, seqs=(), span_ids=(),
                        reason=reason, tool=call.tool, action=call.action)
            self.stopped = f.stamped(self.run_id, self.policy.version)

    def is_turn_limit(self, f: Finding) -> bool:
        """The turn budget's stop: the limit is the last turn allowed, so it bars the calls
        of later turns, not the rest of the turn that reached it."""
        return self._budget.is_turn_limit(f)

    def observe_model(self, model: ModelCall) -> list[Finding]:
        """Feed a model decision (turn count, token cost)."""
        return self._stamp(self._budget.observe_model(model, self.last_call))

    def _stamp(self, found: list[Finding]) -> list[Finding]:
        if not found:
            return found  # most calls
        stamped = [f.stamped(self.run_id, self.policy.version) for f in found]
        if self._may_stop():
            stops = [f for f in stamped if stops_run(f)]
            # Another stop ends the turn the turn limit still lets run: it takes the limit's place.
            self.stopped = next((f for f in stops if not self._budget.is_turn_limit(f)), self.stopped or
                                (stops[0] if stops else None))
        return stamped

    def _may_stop(self) -> bool:
        """No stop yet, or only the turn limit's, which still lets the rest of its turn run."""
        return self.stopped is None or (self._budget.is_turn_limit(self.stopped) and self._budget.last_turn_open())
