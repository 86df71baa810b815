"""What the current product makes of the issue-30 captures (fw_captures/): each capture is converted
to OTLP/JSON (scripts/captures_to_otlp.py) and run through `otel-loopguard audit` (in process, the
same code as the CLI); the result is compared with the label each capture carries in
meta.expected (written by the run scripts before any audit). Writes fw_captures/AUDIT.md.

    .venv/bin/python research/conventions/fw_audit.py [CAPTURE...]

Run with the project's own environment, not a framework venv. The digest key is a fixed dummy.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("OTEL_LOOPGUARD_KEY", "0123456789abcdef0123456789abcdef")

import captures_to_otlp  # noqa: E402

from otel_loopguard.audit import audit  # noqa: E402

FW = Path(os.environ.get("FW_CAPTURES") or HERE / "fw_captures")


def judge(capture: Path, out: Path) -> dict:
    doc = json.loads(capture.read_text())
    exp = doc["meta"].get("expected", {})
    otlp = captures_to_otlp.convert(capture, out)
    reports = audit([otlp], None)
    calls = [c for r in reports for c in r.calls]
    findings = [f for r in reports for f in r.findings]
    names = [f"{f.kind}/{f.severity}" + (f" {f.tool}" if f.tool else "") for f in findings]
    errors = sum(1 for c in calls if c.ok is False)
    must = exp.get("must", [])
    missing = [m for m in must if not any(n == m or n.startswith(m + " ") or n == m.split(" ")[0] and
                                          len(m.split(" ")) == 1 for n in names)]
    # a must written "kind/severity" matches any tool; "kind/severity tool" matches that tool
    missing = [m for m in must if not any((n == m) or (" " not in m and n.split(" ")[0] == m) for n in names)]
    loud = [n for n in names if "/warn" in n or "/stop" in n]
    unwanted = loud if exp.get("quiet") else []
    calls_ok = len(calls) == exp.get("tool_calls") and errors == exp.get("errors", errors)
    ok = calls_ok and not missing and not unwanted
    return {
        "capture": capture.stem, "runs": len(reports),
        "calls": f"{len(calls)}/{exp.get('tool_calls')}", "errors": f"{errors}/{exp.get('errors')}",
        "tools": sorted({c.tool for c in calls}),
        "expected": ", ".join(must) + (" (quiet)" if exp.get("quiet") else "") if must or exp.get("quiet") else "-",
        "found": ", ".join(names) or "none", "missing": missing, "unwanted": unwanted, "ok": ok,
        "note": exp.get("note", ""),
    }


def _grid(rows: list[dict]) -> str:
    """combo x scenario: calls found/expected, and OK or what went wrong (compact)."""
    cells: dict[str, dict[str, str]] = {}
    scenarios: list[str] = []
    for r in rows:
        parts = r["capture"].split("__")  # <combo>[__llm-openai]__<scenario>[__content-off]
        variants = [p for p in parts[1:] if p in ("llm-openai", "content-off")]
        combo = "__".join([parts[0]] + variants)
        scenario = next(p for p in parts[1:] if p not in variants)
        if scenario not in scenarios:
            scenarios.append(scenario)
        if r["ok"]:
            text = "OK"
        else:
            bits = []
            if r["calls"].split("/")[0] != r["calls"].split("/")[1]:
                bits.append("calls")
            if r["errors"].split("/")[0] != r["errors"].split("/")[1]:
                bits.append("errors")
            bits += [f"no {m}" for m in r["missing"]] + [f"+{u}" for u in r["unwanted"]]
            text = "**" + "; ".join(bits) + "**"
        cells.setdefault(combo, {})[scenario] = f"{r['calls']} {text}"
    order = ["healthy", "repeat", "pingpong", "errors", "parallel"]
    scenarios = [s for s in order if s in scenarios] + sorted(s for s in scenarios if s not in order)
    out = ["| combo | " + " | ".join(scenarios) + " |", "|---" * (len(scenarios) + 1) + "|"]
    for combo in sorted(cells):
        out.append(f"| {combo} | " + " | ".join(cells[combo].get(s, "") for s in scenarios) + " |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted(FW.glob("*.json"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            try:
                rows.append(judge(f, Path(tmp)))
            except Exception as e:  # noqa: BLE001
                rows.append({"capture": f.stem, "runs": 0, "calls": "?", "errors": "?", "tools": [],
                             "expected": "?", "found": f"audit failed: {type(e).__name__}: {e}", "missing": [],
                             "unwanted": [], "ok": False, "note": ""})
    lines = ["| capture | runs | tool calls found/expected | errors found/expected | tools seen | "
             "findings expected (label) | findings given | verdict |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = "OK" if r["ok"] else "**MISS**" + (f" (missing {', '.join(r['missing'])})" if r["missing"] else "") + (
            f" (unwanted {', '.join(r['unwanted'])})" if r["unwanted"] else "")
        lines.append(f"| {r['capture']} | {r['runs']} | {r['calls']} | {r['errors']} | {', '.join(r['tools']) or '-'} "
                     f"| {r['expected']} | {r['found']} | {verdict} |")
    table = "\n".join(lines)
    grid = _grid(rows)
    if not argv:
        (FW / "AUDIT.md").write_text(
            "# `otel-loopguard audit` on the issue-30 captures (generated by fw_audit.py)\n\n"
            "Label = what a correct product must find, written in each run script before auditing. "
            "`must` kinds are matched by kind/severity (and tool where given); `(quiet)` = no warn or stop "
            "finding allowed. A run whose tool spans are not recognised shows 0 calls.\n\n## Grid\n\n" + grid
            + "\n\n## Every capture\n\n" + table + "\n")
    print(table)
    print(grid)
    print(f"{sum(r['ok'] for r in rows)}/{len(rows)} captures as labelled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
