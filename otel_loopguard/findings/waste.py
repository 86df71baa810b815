"""What a loop cost: the waste of each loop finding and of a run (pure; docs/findings.md).

A finding's waste is its offending calls (as many as it names), their tool time, and the model
decisions in between: those that ended after the first offending call started and no later
than the last one started, that is the decisions that asked for the 2nd..nth call. Their
tokens come from the GenAI usage attributes (conventions/spec.py), their cost from the
policy's `prices` (USD per million tokens). The share compares with the run: calls with its
tool calls, seconds with its span from the first call's start to the last call's end.

A run's waste is the union of its loop findings' calls (a `repeat` and the `no_progress`
over the same calls count them once), with the model decisions inside each episode.

The model decisions kept sorted with prefix sums as they come (O(1) each when they come in end
order), then O(log n) a finding.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ..calls import ModelCall, ToolCall
from ..policy import Price
from .model import Finding

# Kinds that describe calls spent going round: their calls are the waste. Budgets and caps
# name the call that reached a limit, integrity kinds the telemetry: they cost nothing extra.
WASTE_KINDS = frozenset({"repeat", "cycle", "no_progress", "error_streak", "poll_budget", "parallel_duplicate"})
NS = 1e9


@dataclass(frozen=True, kw_only=True)
class Waste:
    calls: int
    seconds: Optional[float]  # tool time of the offending calls; None: no call has both its times
    model_calls: Optional[int]  # None: the model decisions of the run are not known here
    input_tokens: Optional[int]
    output_tokens: Optional[int]
    cost_usd: Optional[float]  # None: no model decision known, or one in between has no price
    share_calls: Optional[float]  # of the run's tool calls
    share_seconds: Optional[float]  # of the run's span (first call's start to last call's end)

    @property
    def tokens(self) -> Optional[int]:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens

    def attributes(self, prefix: str) -> dict[str, Any]:
        """`loopguard.finding.waste` or `loopguard.run.waste`: what is unknown is left out."""
        values: dict[str, Any] = {
            "calls": self.calls, "seconds": None if self.seconds is None else round(self.seconds, 6),
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "tokens": self.tokens,
            "cost_usd": self.cost_usd, "share_calls": self.share_calls, "share_seconds": self.share_seconds,
        }
        return {f"{prefix}.{k}": v for k, v in values.items() if v is not None}

    def as_dict(self) -> dict[str, Any]:
        return {k.rsplit(".", 1)[1]: v for k, v in self.attributes("w").items()}


@dataclass(frozen=True, kw_only=True)
class RunTotals:
    """What a share is of: the run's tool calls, and its span in nanoseconds."""

    calls: int
    span_ns: int


class ModelIndex:
    """The run's model decisions by end time, with running sums: any window's tokens and cost
    in two bisections. None, or none with an end time: not known (an agent's calls come from
    its decisions: a run without any was recorded without them), so no tokens are claimed.

    Built as decisions come (`add`): one arriving in end order is appended with its sum, one
    arriving earlier is placed among them and the sums after it done again, in the same order
    as one sort of them all would (ties keep their order of arrival), so the figures are those
    of an index built at once."""

    def __init__(self, models: Optional[Iterable[ModelCall]], price_for: Callable[[Optional[str]], Optional[Price]]):
        self._price_for = price_for
        self.known = False
        self._ends: list[int] = []
        self._rows: list[tuple[int, int, float, bool]] = []  # each decision's input, output, cost, unpriced
        self._sums: list[tuple[int, int, float, int]] = [(0, 0, 0.0, 0)]  # input, output, cost, unpriced
        for m in models or ():
            self.add(m)

    def add(self, m: ModelCall) -> None:
        """One more decision (one without an end time says nothing about a window)."""
        if not m.end_ns:
            return
        self.known = True
        price = self._price_for(m.model)
        cost = 0.0 if price is None else (m.input_tokens * price.input + m.output_tokens * price.output) / 1e6
        at = bisect.bisect_right(self._ends, m.end_ns)
        self._ends.insert(at, m.end_ns)
        self._rows.insert(at, (m.input_tokens, m.output_tokens, cost, price is None))
        del self._sums[at + 1:]
        for n, o, c, u in self._rows[at:]:
            i0, o0, c0, u0 = self._sums[-1]
            self._sums.append((i0 + n, o0 + o, c0 + c, u0 + u))

    def between(self, after_ns: int, until_ns: int) -> tuple[int, int, int, float, int]:
        """Decisions that ended in (after_ns, until_ns]: count, input, output, cost, unpriced."""
        lo = bisect.bisect_right(self._ends, after_ns)
        hi = max(lo, bisect.bisect_right(self._ends, until_ns))
        a, b = self._sums[lo], self._sums[hi]
        return hi - lo, b[0] - a[0], b[1] - a[1], b[2] - a[2], b[3] - a[3]


def finding_waste(f: Finding, calls: Mapping[int, ToolCall], models: ModelIndex, totals: RunTotals) -> Optional[Waste]:
    """The waste of one loop finding; None for kinds that waste nothing (WASTE_KINDS)."""
    if f.kind not in WASTE_KINDS or not f.seqs:
        return None
    return _waste([[calls[s] for s in f.seqs if s in calls]], len(set(f.seqs)), models, totals)


def run_waste(findings: Sequence[Finding], calls: Mapping[int, ToolCall], models: ModelIndex,
              totals: RunTotals) -> Waste:
    """The run's waste: every loop finding's calls once, grouped in episodes of overlapping calls."""
    episodes: list[set[int]] = []
    for f in sorted((f for f in findings if f.kind in WASTE_KINDS and f.seqs), key=lambda f: f.first_seq):
        seqs = set(f.seqs)
        if episodes and min(seqs) <= max(episodes[-1]):
            episodes[-1] |= seqs
        else:
            episodes.append(seqs)
    seen = sum(len(e) for e in episodes)
    return _waste([[calls[s] for s in sorted(e) if s in calls] for e in episodes], seen, models, totals)


def _waste(episodes: list[list[ToolCall]], count: int, models: ModelIndex, totals: RunTotals) -> Waste:
    timed = any(c.start_ns and c.end_ns for e in episodes for c in e)
    seconds = sum(_duration(c) for e in episodes for c in e) / NS if timed else None
    n = tokens_in = tokens_out = unpriced = 0
    cost = 0.0
    for e in episodes:
        starts = sorted(c.start_ns for c in e if c.start_ns)
        if len(starts) > 1:
            got = models.between(starts[0], starts[-1])
            n, tokens_in, tokens_out, cost, unpriced = (n + got[0], tokens_in + got[1], tokens_out + got[2],
                                                        cost + got[3], unpriced + got[4])
    known = models.known
    return Waste(
        calls=count, seconds=seconds,
        model_calls=n if known else None,
        input_tokens=tokens_in if known else None,
        output_tokens=tokens_out if known else None,
        cost_usd=round(cost, 6) if known and not unpriced else None,
        share_calls=round(min(count / totals.calls, 1.0), 4) if totals.calls else None,
        share_seconds=round(min(seconds * NS / totals.span_ns, 1.0), 4)
        if seconds is not None and totals.span_ns > 0 else None,
    )


def _duration(c: ToolCall) -> int:
    return max((c.end_ns or 0) - (c.start_ns or 0), 0) if c.start_ns and c.end_ns else 0


def run_totals(calls: Iterable[ToolCall], count: int) -> RunTotals:
    """The run's span from its calls' times (first start to last end); `count`: its tool calls."""
    timed = [c for c in calls if c.start_ns]
    if not timed:
        return RunTotals(calls=count, span_ns=0)
    start = min(c.start_ns or 0 for c in timed)
    end = max(c.end_ns or c.start_ns or 0 for c in timed)
    return RunTotals(calls=count, span_ns=max(0, end - start))
