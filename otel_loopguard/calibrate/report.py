"""A calibration as text (a table per tool) or as the JSON document of docs/calibrate.md."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Optional

from ..score.readout import total_text, total_waste
from .calibration import Calibration, Result, ToolRow
from .replay import RUN_LEVEL, Replayed, Stop

SCHEMA = "otel-loopguard.calibrate/1"
SHOWN_IDS = 4  # run ids listed per cell of the text table; the JSON lists them all


def to_json(cal: Calibration) -> str:
    return json.dumps(as_document(cal), indent=2, ensure_ascii=False)


def as_document(cal: Calibration) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "runs": [p.run.run_id for p in cal.prepared],
        "tools": cal.tools,
        "candidates": [_result(r, cal.tools) for r in cal.results],
        "recorded": _result(cal.recorded, cal.tools) if cal.recorded else None,
    }


def _result(r: Result, tools: list[str]) -> dict[str, Any]:
    verdicts = Counter(run.passed for run in r.runs)
    doc: dict[str, Any] = {
        "name": r.name,
        "key": r.key,
        "value": r.value,
        "policy_version": r.policy_version,
        "note": r.note,
    }
    if r.key is not None or r.name == "current":
        doc["verdicts"] = {"pass": verdicts[True], "fail": verdicts[False], "unscorable": verdicts[None]}
        doc["verdict_flips"] = {"to_fail": r.to_fail, "to_pass": r.to_pass}
    doc["waste"] = total_waste([run.waste for run in r.runs if run.waste is not None])
    doc["tools"] = [_row(r.tools[t]) for t in tools if t in r.tools]
    doc["per_run"] = [_run(run) for run in r.runs]
    return doc


def _row(row: ToolRow) -> dict[str, Any]:
    return {
        "tool": row.tool,
        "warn_runs": row.warn_runs,
        "stop_runs": [{"run_id": rid, **_stop(s)} for rid, s in row.stops],
        "calls_saved": int(row.saved("calls_saved")),
        "tokens_saved": int(row.saved("tokens_saved")),
        "cost_saved_usd": row.priced(),
        "newly_stopped": row.newly_stopped,
        "no_longer_stopped": row.no_longer_stopped,
    }


def _stop(s: Stop) -> dict[str, Any]:
    return {"tool": s.tool, "kind": s.kind, "seq": s.seq, "calls_saved": s.calls_saved,
            "tokens_saved": s.tokens_saved, "cost_saved_usd": s.cost_saved_usd, "seconds_saved": s.seconds_saved}


def _run(run: Replayed) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "outcome": run.outcome,
        "passed": run.passed,
        "stop": _stop(run.stop) if run.stop else None,
        "caps": [_stop(s) for s in run.caps.values()],
        "findings": [f.as_dict() for f in run.findings],
        "waste": run.waste.as_dict() if run.waste is not None else None,
    }


# -- text ---------------------------------------------------------------------------------

def to_text(cal: Calibration) -> str:
    width = min(max(len(r.name) for r in cal.all_results()), 48)
    lines = [f"CALIBRATE  {len(cal.prepared)} runs, {len(cal.results) - 1} candidates"
             + (", recorded guard decisions" if cal.recorded else "") + " (saved: calls and tokens blocking avoids)"]
    head = (f"  {'candidate':<{width}} {'warn':>4} {'stop':>4}  {'stops at (run:call)':<34} {'calls':>6} "
            f"{'tokens':>7}  vs current")
    quiet = [t for t in cal.tools if not is_loud(cal, t)]
    for tool in cal.tools:
        if tool in quiet:
            continue
        label = "(run-level: no single tool)" if tool == RUN_LEVEL else tool
        lines += ["", f"TOOL {label}", head]
        for r in cal.all_results():
            lines.append(_text_row(r, r.tools.get(tool), width))
    if quiet:
        lines += ["", "NO WARN OR STOP under any candidate: " + ", ".join(quiet)]
    lines += ["", "VERDICTS (release rule; flips against current)"]
    for r in cal.results:
        v = Counter(run.passed for run in r.runs)
        flips = _ids("to fail", r.to_fail) + _ids("to pass", r.to_pass)
        note = f"  [{r.note}]" if r.note else ""
        lines.append(f"  {_cut(r.name, width):<{width}} {v[True]} pass, {v[False]} fail, {v[None]} unscorable"
                     f"{'  ' + '; '.join(flips) if flips else ''}{note}")
    lines += ["", "LOOPS COST (the calls of the loops each candidate finds, and the model calls in between)"]
    for r in cal.results:
        total = total_waste([run.waste for run in r.runs if run.waste is not None])
        lines.append(f"  {_cut(r.name, width):<{width}} " + (total_text(total) if total["calls"] else "no loop"))
    return "\n".join(lines) + "\n"


def is_loud(cal: Calibration, tool: str) -> bool:
    """A tool some candidate (or the recording) warns or stops on: the others get one line."""
    return any(row.warn_runs or row.stops or row.no_longer_stopped
               for r in cal.all_results() if (row := r.tools.get(tool)) is not None)


def _text_row(r: Result, row: Optional[ToolRow], width: int) -> str:
    if row is None:
        row = ToolRow(tool="")
    where = ", ".join(f"{rid}:{s.seq}" for rid, s in row.stops[:SHOWN_IDS])
    if len(row.stops) > SHOWN_IDS:
        where += f" +{len(row.stops) - SHOWN_IDS}"
    flips = _ids("+", row.newly_stopped, "") + _ids("-", row.no_longer_stopped, "")
    vs = "" if r.name == "current" else (" ".join(flips) if flips else "same")
    stop_runs = len({rid for rid, _ in row.stops})
    return (f"  {_cut(r.name, width):<{width}} {len(row.warn_runs):>4} {stop_runs:>4}  {_cut(where, 34):<34} "
            f"{int(row.saved('calls_saved')):>6} {int(row.saved('tokens_saved')):>7}  {vs}")


def _ids(label: str, ids: list[str], sep: str = ": ") -> list[str]:
    if not ids:
        return []
    shown = ",".join(ids[:SHOWN_IDS]) + (f" (+{len(ids) - SHOWN_IDS})" if len(ids) > SHOWN_IDS else "")
    return [f"{label}{sep}{shown}"]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"
