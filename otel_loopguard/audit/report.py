"""Render run reports as text for people or as the contract's JSON document."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..findings.episodes import plan
from ..findings.wording import with_next_step
from ..score import RunReport
from ..score.readout import readout, shown_text, total_text, total_waste, waste_text

EXIT_MEANING = {
    0: "every run passes the release rule",
    1: "a run fails the release rule",
    2: "bad input",
    3: "nothing failed, but no run could be judged whole (unscorable, or no tool calls)",
}


def to_json(reports: list[RunReport]) -> str:
    doc = {"runs": [_run(r) for r in reports]}
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False)


def _run(report: RunReport) -> dict[str, Any]:
    """Every finding, as the contract lists them, each with its episode (the one a person reads
    first: the primary) and, for a loop, its waste; then the run's waste."""
    shown = readout(report)
    episode = {i: n for n, e in enumerate(plan(report.findings))
               for i in (e.primary, *e.warned, *e.members, *(w for ws in e.member_warned.values() for w in ws))}
    return {
        "run_id": report.run_id,
        "outcome": report.outcome,
        "findings": [{**f.as_dict(), "reason": with_next_step(f).reason, "episode": episode[i],
                      **({"waste": shown.by_finding[id(f)].as_dict()} if id(f) in shown.by_finding else {})}
                     for i, f in enumerate(report.findings)],
        "score": report.score,
        "waste": shown.waste.as_dict(),
    }


def to_text(reports: list[RunReport]) -> str:
    return "\n".join(_run_text(r) for r in reports)


def _run_text(report: RunReport) -> str:
    verdict = {True: "PASS", False: "FAIL", None: "UNSCORABLE"}[report.passed]
    lines = [f"RUN {report.run_id}  outcome={report.outcome}  release={verdict}"]
    lines.append("  seq     call_id              tool                 digest            outcome")
    for c in report.calls:
        outcome = {True: "ok", False: "error", None: "unknown"}[c.ok]
        lines.append(f"  {c.seq:06d}  {_cut(c.call_id, 20)} {_cut(c.tool, 20)} {c.action[:16]}  {outcome}")
    shown = readout(report)
    lines.append("  findings:" if shown.shown else "  findings: none")
    for s in shown.shown:  # one a loop: its warn folded in, other kinds over its calls riding on it
        f = s.finding
        where = f"seq {f.first_seq}-{f.last_seq}" if f.first_seq != f.last_seq else f"seq {f.first_seq}"
        lines.append(f"    {f.severity:<4} {f.kind:<19} {where:<12} x{f.count:<3} {f.reason}{shown_text(s)}")
        if s.waste is not None:
            lines.append(f"{'':9}cost: {waste_text(s.waste)}")
    if shown.waste.calls:
        lines.append(f"  loops cost: {waste_text(shown.waste)}")
    score = report.score
    if score.get("scorable"):
        fields = {k: v for k, v in score.items() if k not in ("release", "findings_by_kind", "scorable")}
        lines.append("  score: " + ", ".join(f"{k}={_show(v)}" for k, v in fields.items()))
        for broken in shown.broken:
            lines.append(f"  release rule broken: {broken}")
    return "\n".join(lines) + "\n"


def _cut(text: Any, width: int) -> str:
    s = "-" if text is None else str(text)
    return (s if len(s) <= width else s[: width - 1] + "~").ljust(width)


def _show(v: Any) -> str:
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def summary_text(reports: list[RunReport], empty: list[Path], status: int) -> str:
    """The last lines a person reads: runs, findings by kind, the release rule, the exit status;
    and, first, any file that held no tool call at all."""
    lines = [""] if reports else []  # a blank line after the last run
    lines += [f"NO TOOL CALLS in {path}: no NDJSON tool-call records and no tool spans (GenAI execute_tool, "
             "OpenInference TOOL, Traceloop tool, or tagged by otel_loopguard) to judge" for path in empty]
    verdicts = Counter(r.passed for r in reports)
    lines.append(f"SUMMARY  runs: {len(reports)} ({verdicts[True]} pass, {verdicts[False]} fail, "
                 f"{verdicts[None]} unscorable)")
    kinds = Counter(f.kind for r in reports for f in r.findings)
    stops = Counter(f.kind for r in reports for f in r.findings if f.severity == "stop")
    shown = [f"{kind} {n}" + (f" ({stops[kind]} stop)" if stops[kind] else "") for kind, n in kinds.most_common()]
    lines.append("  findings by kind: " + (", ".join(shown) if shown else "none"))
    wasted = [readout(r).waste for r in reports]
    if any(w.calls for w in wasted):
        lines.append("  loops cost: " + total_text(total_waste(wasted)))
    failing = [r.run_id for r in reports if r.passed is False]
    if failing:
        rule = "FAILS for " + ", ".join(failing[:5]) + (f" and {len(failing) - 5} more" if len(failing) > 5 else "")
    elif verdicts[True]:
        rule = "holds for every scored run"
    else:
        rule = "not applied: no run could be scored"
    lines.append(f"  release rule: {rule}")
    lines.append(f"  exit status: {status} ({EXIT_MEANING.get(status, '?')})")
    return "\n".join(lines) + "\n"

