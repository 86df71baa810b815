"""Calibrate's verdict for the current policy is audit's, run by run, on every input we hold
(bundled examples, the recorded observe-mode example, the audit fixtures, the framework
captures); and each swept candidate's verdicts are those of a plain audit under a policy
file with that one value changed: the shared parse and fingerprints change nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from otel_loopguard.audit import audit
from otel_loopguard.calibrate.command import run_calibration

from calibrate_helpers import EXAMPLES, FIXTURES, OBSERVED, RUN_ATTR
from tiers import cases


def _fixture_files() -> list[Path]:
    return sorted([*(FIXTURES / "ndjson").glob("*.ndjson"), *(FIXTURES / "otlp").iterdir()])


def _same_verdicts(files: list[Path], policy: Optional[Path] = None, run_attr: Optional[str] = None) -> int:
    reports = audit(files, policy, run_id_attribute=run_attr)
    cal = run_calibration(files, [], policy, run_id_attribute=run_attr)
    current = cal.results[0]
    assert [r.run_id for r in current.runs] == [r.run_id for r in reports]
    for mine, theirs in zip(current.runs, reports):
        assert (mine.outcome, mine.passed) == (theirs.outcome, theirs.passed), mine.run_id
        assert [f.as_dict() for f in mine.findings] == [f.as_dict() for f in theirs.findings], mine.run_id
    return len(reports)


def test_bundled_examples_get_audits_verdicts() -> None:
    files = sorted(EXAMPLES.glob("*.ndjson"))
    assert _same_verdicts(files) == 3
    assert _same_verdicts([OBSERVED], run_attr=RUN_ATTR) == 4


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda p: p.name)
def test_every_audit_fixture_gets_audits_verdicts(path: Path) -> None:
    assert _same_verdicts([path]) >= 1


def test_every_recorded_capture_gets_audits_verdicts(captures: list[Path]) -> None:
    assert _same_verdicts(captures) == len(captures)
    seed = FIXTURES / "policies" / "seed-v1.yaml"
    assert _same_verdicts(captures, seed) == len(captures)


SWEEPS = ["repeat.stop_at=2..7", "no_progress.stop_at=3,6,9", "cycle.stop_at=2,4", "error_streak.stop_at=2,5",
          "budget.max_tool_calls=4,10,null", "budget.max_turns=3,null", "tools.lookup_order.max_calls=2,6",
          "tools.search_cases.max_calls=5,10", "tools.get_export_status.exempt_repeat=true",
          "tools.lookup_order.repeat.stop_at=3"]


def _with(path: tuple[str, ...], value: Any, base: dict[str, Any]) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(base))
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    if path[-1] == "stop_at" and node.get("warn_at", 3 if path[-2] != "cycle" else 2) > value:
        node["warn_at"] = value  # what calibrate does, and says in the candidate's note
    return data


def test_each_candidate_judges_as_an_audit_under_that_policy_file(tmp_path: Path, captures: list[Path]) -> None:
    files = [*sorted(EXAMPLES.glob("*.ndjson")), *captures[:cases(12, 3)]]  # tests/tiers.py
    cal = run_calibration(files, SWEEPS)
    assert len(cal.results) == 1 + 6 + 3 + 2 + 2 + 3 + 2 + 2 + 2 + 1 + 1  # current, then each value of each sweep
    for result in cal.results[1:]:
        key, _, _ = result.name.partition("=")
        policy = tmp_path / "candidate.yaml"
        policy.write_text(yaml.safe_dump(_with(tuple(key.split(".")), result.value, {})), encoding="utf-8")
        reports = audit(files, policy)
        assert [(r.run_id, r.passed) for r in result.runs] == [(r.run_id, r.passed) for r in reports], result.name
        assert [[f.as_dict() for f in r.findings] for r in result.runs] == \
            [[f.as_dict() for f in r.findings] for r in reports], result.name


def test_the_observed_runs_verdicts_flip_where_the_threshold_moves() -> None:
    """Mutation-style: the sweep must change verdicts exactly where the loop's length says."""
    cal = run_calibration([OBSERVED], ["repeat.stop_at=4..8", "tools.get_export_status.exempt_repeat=true"],
                          run_id_attribute=RUN_ATTR)
    by_name = {r.name: r for r in cal.results}
    assert sorted(r.run_id for r in by_name["current"].runs if r.passed is False) == ["export-poller", "support-A12"]
    assert by_name["repeat.stop_at=4"].to_fail == ["refund-search"]  # its query re-run four times
    assert by_name["repeat.stop_at=7"].to_pass == ["export-poller"]  # six identical polls in a row
    assert by_name["tools.get_export_status.exempt_repeat=true"].to_pass == ["export-poller"]
    assert by_name["repeat.stop_at=5"].to_fail == by_name["repeat.stop_at=5"].to_pass == []
