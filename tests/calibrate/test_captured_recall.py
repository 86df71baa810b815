"""Recall pinned on every recorded framework capture: the findings the audit raises on each
capture (kind, severity, tool, sequence range, per run) are committed in
captured_findings.json. A change in detection shows here as a diff of named findings, lost
or gained, rather than passing unnoticed; a change that is meant is committed with a new
file (LOOPGUARD_UPDATE_RECALL=1 writes it) and its diff read in review."""

from __future__ import annotations

import json
import os
from pathlib import Path

from otel_loopguard.audit import audit

GOLDEN = Path(__file__).with_name("captured_findings.json")


def _findings(captures: list[Path]) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for path in captures:
        runs = audit([path], None)
        out[path.stem] = [
            [f"{r.outcome}"] + [f"{f.kind}/{f.severity} {f.tool or '-'} {f.first_seq}..{f.last_seq}" for f in r.findings]
            for r in runs
        ]
    return dict(sorted(out.items()))


def test_the_findings_on_every_capture_are_the_committed_ones(captures: list[Path]) -> None:
    found = _findings(captures)
    if os.environ.get("LOOPGUARD_UPDATE_RECALL"):
        GOLDEN.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(found) == sorted(expected), "a capture was added or removed: LOOPGUARD_UPDATE_RECALL=1"
    changed = {name: (expected[name], found[name]) for name in found if found[name] != expected[name]}
    assert not changed, json.dumps(changed, indent=1)


def test_the_pinned_findings_hold_stops_and_quiet_runs() -> None:
    """The committed file is not empty by accident: captured loops stop, legitimate runs are quiet."""
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    runs = [run for name in expected for run in expected[name]]
    stops = [run for run in runs if any("/stop " in f for f in run[1:])]
    quiet = [run for run in runs if not any("/stop " in f or "/warn " in f for f in run[1:])]
    assert len(stops) >= 7 and len(quiet) >= 10, (len(stops), len(quiet))
