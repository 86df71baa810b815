"""Render run reports as text for people or as the contract's JSON document."""

from __future__ import annotations

import json
from typing import Any

from ..score import RunReport


def to_json(reports: list[RunReport]) -> str:
    doc = {"runs": [_run(r) for r in reports]}
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False)


def _run(report: RunReport) -> dict[str, Any]:
    return {
        "run_id": report.run_id,
        "outcome": report.outcome,
        "findings": [{**f.as_dict(), "reason": f.reason} for f in report.findings],
        "score": report.score,
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
    lines.append("  findings:" if report.findings else "  findings: none")
    for f in report.findings:
        where = f"seq {f.first_seq}-{f.last_seq}" if f.first_seq != f.last_seq else f"seq {f.first_seq}"
        lines.append(f"    {f.severity:<4} {f.kind:<19} {where:<12} x{f.count:<3} {f.reason}")
    score = report.score
    if score.get("scorable"):
        fields = {k: v for k, v in score.items() if k not in ("release", "findings_by_kind", "scorable")}
        lines.append("  score: " + ", ".join(f"{k}={_show(v)}" for k, v in fields.items()))
        for violation in score["release"]["violations"]:
            lines.append(f"  release rule broken: {violation}")
    return "\n".join(lines) + "\n"


def _cut(text: Any, width: int) -> str:
    s = "-" if text is None else str(text)
    return (s if len(s) <= width else s[: width - 1] + "~").ljust(width)


def _show(v: Any) -> str:
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
