"""`budget` (turns, tool calls, cost, wall time) and `tool_cap` (calls per tool).

Each ceiling warns at `warn_ratio` of its limit and stops when the limit is
reached: the limit is the last call allowed, so the next one must not run. For
turns it is the last turn allowed: that turn's parallel calls still run.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Optional

from ..bounded import BoundedSet
from ..calls import ModelCall, ToolCall
from ..findings import STOP, Finding, finding
from ..policy import BudgetRule, Policy, ToolRule
from .base import Latch, Step

_NS = 1e9
MAX_TRACKED_TURNS = 4096


class BudgetDetector:
    kind = "budget"

    def __init__(self, policy: Policy):
        self._policy = policy
        self._rule = policy.budget
        self._latches = {"turns": Latch(), "tool_calls": Latch(), "cost": Latch(), "seconds": Latch()}
        self._warn, self._due = _levels(policy.budget)
        self._tool_calls = 0
        self._turns = 0
        self._seen_turns = BoundedSet(MAX_TRACKED_TURNS)
        self._cost = 0.0
        self._first_start: Optional[int] = None
        self._last_end: Optional[int] = None  # the latest end of an observed call: what the preview times
        self._last_turn: Optional[int] = None  # the turn that reached the turn limit: the last allowed
        self._turn_now: Optional[int] = None  # the turn of the call or decision observed last

    def observe(self, step: Step) -> list[Finding]:
        call = step.call
        self._tool_calls += 1
        self._count_turn(call.turn)
        self._turn_now = call.turn
        if call.start_ns and self._first_start is None:
            self._first_start = call.start_ns
        if call.end_ns and (self._last_end is None or call.end_ns > self._last_end):
            self._last_end = call.end_ns
        # Most calls are below every level at which a budget can fire: three comparisons.
        due, out = self._due, []
        if self._tool_calls >= due.get("tool_calls", _NEVER):
            out += self._check("tool_calls", self._tool_calls, self._rule.max_tool_calls, call)
        if self._turns >= due.get("turns", _NEVER):
            out += self._check("turns", self._turns, self._rule.max_turns, call)
        elapsed = self._elapsed(call) if self._rule.max_seconds is not None else None
        if elapsed is not None and elapsed >= due["seconds"]:
            out += self._check("seconds", elapsed, self._rule.max_seconds, call)
        return out

    def preview(self, step: Step) -> Optional[tuple[str, str]]:
        """Before dispatch: a budget already used up stops the next call. The turn budget's
        limit is the last turn allowed, so it stops a call only if the call starts a turn
        beyond it: the parallel siblings of the last turn run. Wall time is judged on the
        calls observed (first start to latest end), as observe() judges it: the call whose
        end reaches the limit is the last allowed, the one after it is stopped."""
        r = self._rule
        turn = step.call.turn
        starts_turn = turn is not None and turn not in self._seen_turns
        seconds = self.seconds_used()
        spent = [
            (r.max_tool_calls, self._tool_calls, "tool calls"),
            (r.max_turns, self._turns + (1 if starts_turn else 0) - 1, "turns"),
            (r.max_cost_usd, self._cost, "USD"),
            (r.max_seconds, seconds if seconds is not None else -math.inf, "seconds"),
        ]
        for limit, used, unit in spent:
            if limit is not None and used >= limit:
                return "stop", f"the run already used its budget of {limit:g} {unit}"
        # From warn_ratio of a budget on, each call (each new turn) is told where it stands.
        if r.max_tool_calls is not None and self._tool_calls + 1 >= self._warn["tool_calls"]:
            return "warn", f"this is tool call {self._tool_calls + 1} of the {r.max_tool_calls} the run may make"
        if r.max_turns is not None and starts_turn and self._turns + 1 >= self._warn["turns"]:
            return "warn", f"this is turn {self._turns + 1} of the {r.max_turns} the run may take"
        if r.max_seconds is not None and seconds is not None and seconds >= self._warn["seconds"]:
            return "warn", f"the run has used {seconds:.2f} of the {r.max_seconds:g} seconds it may take"
        return None

    def seconds_used(self) -> Optional[float]:
        """Wall time of the calls observed so far: the first one's start to the latest end."""
        if self._first_start is None or self._last_end is None:
            return None
        return (self._last_end - self._first_start) / _NS

    def is_turn_limit(self, f: Finding) -> bool:
        """Whether `f` is this budget's stop for reaching the turn limit."""
        return f.severity == STOP and is_turn_budget(f)

    def refused(self, turn: Optional[int]) -> None:
        """A call of another turn was refused: the last turn allowed is over for good."""
        if turn is not None and turn != self._last_turn:
            self._last_turn = None

    def last_turn_open(self) -> bool:
        """The turn limit was reached and its turn still runs (no later turn refused yet)."""
        return self._last_turn is not None

    def in_last_turn(self, stop: Finding, turn: Optional[int]) -> bool:
        """Whether `stop` is this budget's turn limit, reached in the turn `turn` belongs to:
        that turn's other calls still run."""
        return self.is_turn_limit(stop) and turn is not None and turn == self._last_turn

    def observe_model(self, model: ModelCall, last: Optional[ToolCall]) -> list[Finding]:
        self._count_turn(model.turn)
        self._turn_now = model.turn
        price = self._policy.price_for(model.model)
        if price is not None:
            self._cost += (model.input_tokens * price.input + model.output_tokens * price.output) / 1e6
        out = self._check("turns", self._turns, self._rule.max_turns, last)
        return out + self._check("cost", self._cost, self._rule.max_cost_usd, last)

    def _count_turn(self, turn: Optional[int]) -> None:
        # Distinct turn indexes: a decision seen from its model span and from its
        # tool calls, in either order, is one turn.
        if turn is not None and self._seen_turns.add(turn):
            self._turns += 1

    def _elapsed(self, call: ToolCall) -> Optional[float]:
        if self._first_start is None or not call.end_ns:
            return None
        return (call.end_ns - self._first_start) / _NS

    def _check(
        self, name: str, used: float, limit: Optional[float], call: Optional[ToolCall]
    ) -> list[Finding]:
        if limit is None:
            return []
        level = self._latches[name].level(used, self._warn[name], limit)
        if level is None:
            return []
        shown = f"{used:.2f}" if name in ("cost", "seconds") else str(int(used))
        reason = f"the run used {shown} {_UNITS[name]} of its budget of {limit:g}"
        calls = [call] if call is not None else []
        found = finding("budget", level, calls, reason, count=len(calls))
        if name == "turns" and level == STOP:
            self._last_turn = self._turn_now
        return [found]


_NEVER = math.inf  # the warn level of a budget the policy leaves unset


@lru_cache(maxsize=64)
def _levels(r: BudgetRule) -> tuple[dict[str, float], dict[str, float]]:
    """Warn levels, and the level below which each budget cannot fire (its warn level, or
    its limit if that is lower). Computed once per rule: every run of the receiver starts
    a BudgetDetector, and the results are never mutated."""
    limits = {"turns": r.max_turns, "tool_calls": r.max_tool_calls, "cost": r.max_cost_usd, "seconds": r.max_seconds}
    warn = {
        name: warn_at(limit, r.warn_ratio, name in ("turns", "tool_calls"))
        for name, limit in limits.items()
        if limit is not None
    }
    return warn, {name: min(warn[name], limit) for name, limit in limits.items() if limit is not None}


_UNITS = {"turns": "turns", "tool_calls": "tool calls", "cost": "USD", "seconds": "seconds"}


def is_turn_budget(f: Finding) -> bool:
    """A budget finding about turns (whose limit lets the rest of its last turn run); told
    apart by the reason `_check` writes, the only place that says which budget it was."""
    return f.kind == "budget" and f" {_UNITS['turns']} of its budget of " in f.reason


def warn_at(limit: float, ratio: float, whole: bool = True) -> float:
    """The warn level: `ratio` of the limit, rounded up to a whole count for counts.

    Rounding first to 9 places keeps float noise (100 x 0.55 = 55.000000000000007)
    from pushing the level up by one.
    """
    level = round(limit * ratio, 9)
    return min(limit, math.ceil(level)) if whole else level


class ToolCapDetector:
    kind = "tool_cap"

    @staticmethod
    def applies(rule: ToolRule) -> bool:
        return rule.max_calls is not None  # only tools with a cap are counted

    def __init__(self, policy: Policy):
        self._policy = policy
        self._counts: dict[str, int] = {}
        self._latches: dict[str, Latch] = {}

    def observe(self, step: Step) -> list[Finding]:
        cap = step.rule.max_calls
        if cap is None:
            return []
        tool = step.call.tool
        count = self._counts.get(tool, 0) + 1
        self._counts[tool] = count
        latch = self._latches.setdefault(tool, Latch())
        level = latch.level(count, warn_at(cap, self._policy.budget.warn_ratio), cap)
        if level is None:
            return []
        reason = f"{tool} was called {count} times; its cap is {cap} calls per run"
        return [finding("tool_cap", level, [step.call], reason, count=count, tool=tool)]

    def preview(self, step: Step) -> Optional[tuple[str, str]]:
        cap = step.rule.max_calls
        if cap is None:
            return None
        tool = step.call.tool
        used = self._counts.get(tool, 0)
        if used >= cap:
            return "stop", f"{tool} already made its {cap} calls allowed per run"
        if used + 1 >= warn_at(cap, self._policy.budget.warn_ratio):
            return "warn", f"this is call {used + 1} of the {cap} {tool} may make per run"
        return None
