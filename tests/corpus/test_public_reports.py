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


# Loops the product does not stop by their label yet, and why (one line each).
KNOWN_MISSES = {
    "005-cortex-healthcheck-volatile": "the shape form of the raw HTTP text still differs on every answer (an uptime "
                                       "counter inside it is not a masked shape), so each answer is new",
    "007-pi-echo-noop-counter": "the answer carries a label with a counter (noop131, noop132...): a new item each time",
    "013-stella-test-interleaved-reads": "(baseline diagnosis) the reads between the test runs bring new file "
                                         "content, so the same failing test run never repeats in a row",
    "018-alanwest-kb-search-reworded": "(baseline diagnosis) reworded queries and re-ranked hits whose scores move",
    "020-gemini-google-search-no-results": "(baseline diagnosis) reworded queries, re-ranked hits, and the query "
                                           "echoed in the answer",
    "023-shaft-subagent-reasked-reworded": "(baseline diagnosis) a new preamble each time; the refusal's opening "
                                           "line, token count and duration vary",
    "025-codex-echo-and-true": "the echo and `true` rituals are acknowledgements of new actions (neutral), so only "
                               "the last four `cd ... && true` calls count: repeat warns, nothing stops",
    "032-roo-apply-diff-missing-function": "(baseline diagnosis) each diff and each error (similarity %, line "
                                           "number) differ, and the re-read between tries resets the error streak",
    "034-localharness-identical-rewrites": "(baseline diagnosis) writes are not side effects under the default "
                                           "policy, and the read between the two bursts resets the repeat count",
}


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
