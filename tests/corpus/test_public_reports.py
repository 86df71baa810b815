"""The public-report corpus (issue 26, item 4): loops and legitimate look-alikes that users
reported to agent projects, rebuilt as recorded runs and labelled before the product judged
them (tests/corpus/public/README.md).

TARGET: every loop stopped by its label (a stop finding with last_seq <= stop_by), and no
legitimate case flagged (no loop-kind finding at warn or above).

Every legitimate case must stay quiet, and every loop must be stopped by its label, except the
loops in KNOWN_MISSES: those are strict expected failures naming why the product misses them
today, so a regression fails and so does a fix (then take the case off the list). The figures
print with `pytest tests/corpus -s`, beside the baseline recorded before the equivalence work
(tests/corpus/public/baseline.json; docs/findings.md has both).
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


# Loops the product does not stop by their label yet, and why (one line each, re-checked
# against today's product; tests/corpus/public/README.md has the full diagnosis).
KNOWN_MISSES: dict[str, str] = {}
HOLDOUT = PUBLIC / "holdout"
HOLDOUT_MANIFEST = score.load_manifest(HOLDOUT / "manifest.json")
# Holdout loops missed today (none: see the README's holdout section for the figures before).
HOLDOUT_KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["id"] for e in MANIFEST])
def test_case(entry: dict) -> None:
    verdict = score.score_case(entry)
    if entry["class"] == "legit":
        assert verdict.verdict == "quiet", f"{entry['id']}: flagged ({verdict})"
        return
    if entry["id"] in KNOWN_MISSES:
        pytest.xfail(KNOWN_MISSES[entry["id"]]) if verdict.verdict != "stopped" else pytest.fail(
            f"{entry['id']} is stopped by its label now: take it off KNOWN_MISSES")
    assert verdict.verdict == "stopped", f"{entry['id']}: {verdict.verdict} ({verdict})"


@pytest.mark.parametrize("entry", HOLDOUT_MANIFEST, ids=[e["id"] for e in HOLDOUT_MANIFEST])
def test_holdout_case(entry: dict) -> None:
    verdict = score.score_case(entry, HOLDOUT)
    if entry["class"] == "legit":
        assert verdict.verdict == "quiet", f"{entry['id']}: flagged ({verdict})"
        return
    if entry["id"] in HOLDOUT_KNOWN_MISSES:
        pytest.xfail(HOLDOUT_KNOWN_MISSES[entry["id"]]) if verdict.verdict != "stopped" else pytest.fail(
            f"{entry['id']} is stopped by its label now: take it off HOLDOUT_KNOWN_MISSES")
    assert verdict.verdict == "stopped", f"{entry['id']}: {verdict.verdict} ({verdict})"


def test_holdout_manifest_is_complete() -> None:
    """The holdout set: its own files, labels and sources, none of them in the main set."""
    assert {p.name for p in HOLDOUT.glob("*.ndjson")} == {e["file"] for e in HOLDOUT_MANIFEST}
    assert sum(e["class"] == "loop" for e in HOLDOUT_MANIFEST) >= 8
    assert sum(e["class"] == "legit" for e in HOLDOUT_MANIFEST) >= 5
    assert not {e["source_url"] for e in HOLDOUT_MANIFEST} & {e["source_url"] for e in MANIFEST}
    for e in HOLDOUT_MANIFEST:
        assert e["set"] == "holdout" and e["source_url"].startswith("https://") and e["why"], e["id"]
        if e["class"] == "loop":
            assert isinstance(e["stop_by"], int) and 1 <= e["stop_by"] < e["calls"], e["id"]
        else:
            assert e["must_stay_quiet"] is True, e["id"]


def test_figures() -> None:
    """Prints recall and false positives, now and at the baseline."""
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
    held = score.score_all(HOLDOUT_MANIFEST, HOLDOUT)
    print("\nholdout set (labelled before the product judged it):\n" + score.report(held))
    h = score.figures(held)
    print(f"holdout: recall {h['stopped']}/{h['loops']}, false positives {h['false_positives']}/{h['legit']}")
