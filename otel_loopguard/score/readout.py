"""A judged run as a person reads it (pure): one entry a loop, what it cost, the rule in words.

The report keeps every finding (the JSON document lists them all, as the contract says); the
readout folds a warn into its stop and lets kinds of one episode ride on its primary
(findings/episodes.py), gives each loop finding and the run its waste (findings/waste.py),
ends a stop's reason with enforce mode's next step, and says the broken release rules in plain
words (findings/wording.py). Audit and calibrate print it in text, HTML and JUnit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..calls import ToolCall
from ..findings import Finding
from ..findings.episodes import plan, warned_at
from ..findings.waste import ModelIndex, RunTotals, Waste, finding_waste, run_totals, run_waste
from ..findings.wording import plain_rule, with_next_step
from .scoring import RunReport


@dataclass(frozen=True, kw_only=True)
class Shown:
    """One episode: its primary finding (reason with the next step), when its warn came, the
    findings riding on it, and what it cost."""

    finding: Finding
    warned_at_seq: Optional[int]
    riders: tuple[Finding, ...]
    waste: Optional[Waste]


@dataclass(frozen=True, kw_only=True)
class Readout:
    shown: list[Shown]
    waste: Waste
    broken: list[str]  # the release rule's broken parts, in plain words
    by_finding: dict[int, Waste]  # id() of each report finding with a waste -> it (the JSON document)


def readout(report: RunReport) -> Readout:
    calls, models, totals = _inputs(report)
    found = report.findings
    wastes = {i: w for i, f in enumerate(found) if (w := finding_waste(f, calls, models, totals)) is not None}
    shown = [Shown(finding=with_next_step(found[e.primary]), warned_at_seq=warned_at(found, e.warned),
                   riders=tuple(found[m] for m in e.members), waste=wastes.get(e.primary)) for e in plan(found)]
    release = report.score.get("release") or {}
    return Readout(shown=shown, waste=run_waste(found, calls, models, totals),
                   broken=[plain_rule(v) for v in release.get("violations", [])],
                   by_finding={id(found[i]): w for i, w in wastes.items()})


def run_waste_of(report: RunReport) -> Waste:
    """The run's waste alone (calibrate: under each candidate)."""
    calls, models, totals = _inputs(report)
    return run_waste(report.findings, calls, models, totals)


def _inputs(report: RunReport) -> tuple[dict[int, ToolCall], ModelIndex, RunTotals]:
    price_for = report.policy.price_for if report.policy is not None else (lambda _model: None)
    return ({c.seq: c for c in report.calls}, ModelIndex(report.models, price_for),
            run_totals(report.calls, len(report.calls)))


def total_waste(wasted: Sequence[Waste]) -> dict[str, Any]:
    """Several runs' waste summed: calls and runs always, the rest where every run knew it."""
    looped = [w for w in wasted if w.calls]
    out: dict[str, Any] = {"runs": len(looped), "calls": sum(w.calls for w in looped)}
    for name in ("seconds", "tokens", "cost_usd"):
        values = [getattr(w, name) for w in looped]
        if looped and all(v is not None for v in values):
            out[name] = round(sum(values), 6)
    return out


def total_text(total: dict[str, Any]) -> str:
    """`12 calls in 3 runs, 9.5 s of tool time, 41.2 k tokens, $0.21`."""
    parts = [f"{total['calls']} calls in {total['runs']} run{'s' if total['runs'] != 1 else ''}"]
    if "seconds" in total:
        parts.append(f"{total['seconds']:.1f} s of tool time")
    if "tokens" in total:
        parts.append(f"{_tokens(int(total['tokens']))} tokens")
    if "cost_usd" in total:
        parts.append(usd(total["cost_usd"]))
    return ", ".join(parts)


def waste_text(w: Waste) -> str:
    """`5 calls (83 % of the run), 4.2 s of tool time (34 % of the run), 4 model calls in between,
    14.1 k tokens, $0.03`: what is not known is left out."""
    parts = [f"{w.calls} call{'s' if w.calls != 1 else ''}" + _share(w.share_calls)]
    if w.seconds is not None:
        parts.append(f"{w.seconds:.1f} s of tool time" + _share(w.share_seconds))
    if w.model_calls is not None:
        parts.append(f"{w.model_calls} model call{'s' if w.model_calls != 1 else ''} in between")
    if w.tokens is not None:
        parts.append(f"{_tokens(w.tokens)} tokens")
    if w.cost_usd is not None:
        parts.append(usd(w.cost_usd))
    return ", ".join(parts)


def usd(amount: float) -> str:
    """`$0.0312`, `$12.5`, `$0`: four decimals at most, no trailing zeros."""
    text = f"{amount:.4f}".rstrip("0").rstrip(".")
    return f"${text if text not in ('', '-0') else '0'}"


def _share(share: Optional[float]) -> str:
    return "" if share is None else f" ({round(share * 100)} % of the run)"


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f} k" if n >= 1000 else str(n)


def shown_text(s: Shown) -> str:
    """What follows a finding's reason: when its warn came and what rides on it."""
    notes = []
    if s.warned_at_seq is not None:
        notes.append(f"warned at call {s.warned_at_seq}")
    if s.riders:
        notes.append("same calls: " + ", ".join(f"{r.kind} ({r.severity})" for r in s.riders))
    return f" [{'; '.join(notes)}]" if notes else ""


def waste_json(w: Optional[Waste]) -> Optional[dict[str, Any]]:
    return None if w is None else w.as_dict()
