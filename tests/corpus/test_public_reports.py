"""The public-report corpus (issue 26, item 4): loops and legitimate look-alikes that users
reported to agent projects, rebuilt as recorded runs and labelled before the product judged
them (tests/corpus/public/README.md).

TARGET: every loop stopped by its label (a stop finding with last_seq <= stop_by), and no
legitimate case flagged (no loop-kind finding at warn or above).

For now this test asserts only that every fixture parses and scores, prints the figures
(`pytest tests/corpus -s`), and reports each case whose verdict changed from the recorded
baseline (tests/corpus/public/baseline.json). The detector work to reach the target is in
progress; the assertion will be tightened to the target once it lands.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

PUBLIC = Path(__file__).resolve().parent / "public"


def _load_scorer():
    # Loaded by path under its own name: `score` alone would clash with tests/score.
    spec = importlib.util.spec_from_file_location("public_corpus_score", PUBLIC / "score.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


score = _load_scorer()

MANIFEST = score.load_manifest()
LOOP_IDS = [e["id"] for e in MANIFEST if e["class"] == "loop"]
LEGIT_IDS = [e["id"] for e in MANIFEST if e["class"] == "legit"]


def test_manifest_is_complete() -> None:
    """Every NDJSON file has an entry, every entry a file, a source, a label and a reason."""
    files = {p.name for p in PUBLIC.glob("*.ndjson")}
    assert files == {e["file"] for e in MANIFEST}
    assert len(LOOP_IDS) >= 30 and len(LEGIT_IDS) >= 10
    for e in MANIFEST:
        assert e["source_url"].startswith("https://"), e["id"]
        assert e["source_summary"] and e["why"] and e["kind_hint"] and e["noise"], e["id"]
        if e["class"] == "loop":
            assert isinstance(e["stop_by"], int) and 1 <= e["stop_by"] < e["calls"], e["id"]
        else:
            assert e["class"] == "legit" and e["must_stay_quiet"] is True, e["id"]


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["id"] for e in MANIFEST])
def test_case_parses_and_scores(entry: dict) -> None:
    verdict = score.score_case(entry)
    assert verdict.verdict in (("stopped", "late", "missed") if entry["class"] == "loop" else ("quiet", "flagged"))


def test_figures() -> None:
    """Prints recall and false positives; asserts nothing about them yet (see the module doc)."""
    verdicts = score.score_all(MANIFEST)
    print("\n" + score.report(verdicts))
    baseline = json.loads(score.BASELINE.read_text(encoding="utf-8"))
    changed = [f"{v.id}: {baseline['cases'][v.id]['verdict']} -> {v.verdict}"
               for v in verdicts if v.id in baseline["cases"] and baseline["cases"][v.id]["verdict"] != v.verdict]
    f = score.figures(verdicts)
    b = baseline["figures"]
    print(f"baseline: recall {b['stopped']}/{b['loops']}, false positives {b['false_positives']}/{b['legit']}; "
          f"now: recall {f['stopped']}/{f['loops']}, false positives {f['false_positives']}/{f['legit']}")
    for line in changed:
        print("  changed since baseline:", line)
    assert f["loops"] == len(LOOP_IDS) and f["legit"] == len(LEGIT_IDS)
