"""Score the public-report corpus with the product's default policy, in process.

What `otel-loopguard audit FILE --format json` does, through the package's public function
(`otel_loopguard.audit.audit`, built-in policy, a fixed digest key): each case's NDJSON run is
judged on its own and compared with its label in `manifest.json`.

- a loop is `stopped` when a `stop` finding has `last_seq <= stop_by`, `late` when the first
  stop comes after `stop_by`, `missed` when no finding stops it;
- a legitimate case is `quiet`, or `flagged` when any loop-kind finding reaches `warn`.

Recall = stopped loops / loops. False positives = flagged legitimate cases.

    PYTHONPATH=. python tests/corpus/public/score.py [--json] [--write-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
BASELINE = HERE / "baseline.json"

# Loop kinds (issue 26): budgets, caps and telemetry-integrity findings are not loops.
LOOP_KINDS = frozenset({"repeat", "cycle", "error_streak", "no_progress", "poll_budget", "duplicate_write"})
SEVERITY_RANK = {"info": 0, "warn": 1, "stop": 2}
# A fixed key: digests (and so verdicts) do not depend on a random ephemeral key.
KEY = "public-corpus-key-0123456789abcdef"


@dataclass
class Verdict:
    id: str
    cls: str
    verdict: str  # loop: stopped | late | missed; legit: quiet | flagged
    stop_by: Optional[int] = None
    first_stop: Optional[int] = None  # last_seq of the earliest stop finding
    first_stop_kind: Optional[str] = None
    findings: list[str] = field(default_factory=list)  # "kind:severity@first-last"

    @property
    def ok(self) -> bool:
        return self.verdict in ("stopped", "quiet")


def load_manifest(path: Path = MANIFEST) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


def judge_file(path: Path) -> list[dict[str, Any]]:
    """The findings of the one run in `path`, as the audit's JSON document lists them."""
    from otel_loopguard.audit import audit

    old = os.environ.get("OTEL_LOOPGUARD_KEY")
    os.environ["OTEL_LOOPGUARD_KEY"] = KEY
    try:
        reports = audit([path])
    finally:
        if old is None:
            os.environ.pop("OTEL_LOOPGUARD_KEY", None)
        else:
            os.environ["OTEL_LOOPGUARD_KEY"] = old
    if len(reports) != 1:
        raise ValueError(f"{path.name}: expected one run, got {len(reports)}")
    return [f.as_dict() for f in reports[0].findings]


def score_case(entry: dict[str, Any], corpus: Path = HERE) -> Verdict:
    findings = judge_file(corpus / entry["file"])
    shown = [f"{f['kind']}:{f['severity']}@{f['first_seq']}-{f['last_seq']}" for f in findings]
    stops = sorted((f for f in findings if f["severity"] == "stop"), key=lambda f: f["last_seq"])
    first = stops[0] if stops else None
    v = Verdict(id=entry["id"], cls=entry["class"], verdict="", findings=shown,
                first_stop=first["last_seq"] if first else None, first_stop_kind=first["kind"] if first else None)
    if entry["class"] == "loop":
        v.stop_by = int(entry["stop_by"])
        v.verdict = "missed" if first is None else "stopped" if first["last_seq"] <= v.stop_by else "late"
    else:
        loud = [f for f in findings if f["kind"] in LOOP_KINDS and SEVERITY_RANK[f["severity"]] >= SEVERITY_RANK["warn"]]
        v.verdict = "flagged" if loud else "quiet"
    return v


def score_all(manifest: Optional[list[dict[str, Any]]] = None, corpus: Path = HERE) -> list[Verdict]:
    return [score_case(e, corpus) for e in (manifest if manifest is not None else load_manifest())]


def figures(verdicts: list[Verdict]) -> dict[str, Any]:
    loops = [v for v in verdicts if v.cls == "loop"]
    legit = [v for v in verdicts if v.cls == "legit"]
    stopped = sum(v.verdict == "stopped" for v in loops)
    flagged = sum(v.verdict == "flagged" for v in legit)
    return {
        "loops": len(loops), "stopped": stopped, "late": sum(v.verdict == "late" for v in loops),
        "missed": sum(v.verdict == "missed" for v in loops), "recall": round(stopped / len(loops), 3) if loops else None,
        "legit": len(legit), "false_positives": flagged,
    }


def report(verdicts: list[Verdict]) -> str:
    lines = [f"{'case':<46} {'class':<6} {'verdict':<8} {'stop_by':>7} {'stop@':>6}  findings"]
    for v in verdicts:
        stop_by = "-" if v.stop_by is None else str(v.stop_by)
        at = "-" if v.first_stop is None else str(v.first_stop)
        lines.append(f"{v.id:<46} {v.cls:<6} {v.verdict:<8} {stop_by:>7} {at:>6}  {', '.join(v.findings) or 'none'}")
    f = figures(verdicts)
    lines.append("")
    lines.append(f"recall: {f['stopped']}/{f['loops']} loops stopped by their label ({f['late']} late, {f['missed']} missed)"
                 f"  false positives: {f['false_positives']}/{f['legit']} legitimate cases flagged")
    return "\n".join(lines)


def baseline_document(verdicts: list[Verdict]) -> dict[str, Any]:
    return {
        "policy": "built-in (default)",
        "figures": figures(verdicts),
        "cases": {v.id: {k: val for k, val in asdict(v).items() if k != "id"} for v in verdicts},
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument("--write-baseline", action="store_true", help=f"write {BASELINE.name}")
    args = parser.parse_args(argv)
    verdicts = score_all()
    if args.json:
        print(json.dumps(baseline_document(verdicts), indent=2))
    else:
        print(report(verdicts))
    if args.write_baseline:
        BASELINE.write_text(json.dumps(baseline_document(verdicts), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
