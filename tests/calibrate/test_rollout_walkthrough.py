"""docs/rollout.md's walkthrough says what the commands print: its policy file, taken from the
page, replayed on the bundled recording."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from otel_loopguard.calibrate.command import run_calibration

from calibrate_helpers import OBSERVED, ROOT, RUN_ATTR

PAGE = (ROOT / "docs" / "rollout.md").read_text(encoding="utf-8")


def test_step_2_reads_as_the_page_says() -> None:
    cal = run_calibration([OBSERVED], ["repeat.stop_at=4..8", "tools.get_export_status.exempt_repeat=true",
                                       "tools.search_cases.max_calls=5,10,20"], run_id_attribute=RUN_ATTR)
    assert cal.recorded is not None
    by = {r.name: r for r in cal.results}
    rec = {r.run_id: r.stop.seq if r.stop else None for r in cal.recorded.runs}
    assert rec == {r.run_id: r.stop.seq if r.stop else None for r in by["current"].runs}
    for k in range(4, 8):
        stop = next(r.stop for r in by[f"repeat.stop_at={k}"].runs if r.run_id == "support-A12")
        assert stop is not None and stop.tool == "lookup_order"
    assert by["tools.get_export_status.exempt_repeat=true"].to_pass == ["export-poller"]
    assert by["repeat.stop_at=4"].to_fail == ["refund-search"]
    assert by["tools.search_cases.max_calls=10"].tools["search_cases"].newly_stopped == ["triage-topics"]
    assert by["tools.search_cases.max_calls=5"].tools["search_cases"].newly_stopped == ["refund-search",
                                                                                       "triage-topics"]
    assert "search_cases" not in by["tools.search_cases.max_calls=20"].tools or \
        not by["tools.search_cases.max_calls=20"].tools["search_cases"].stops


def test_step_3_policy_from_the_page(tmp_path: Path) -> None:
    block = re.search(r"```yaml\n# rollout.yaml\n(.*?)```", PAGE, re.S)
    assert block, "docs/rollout.md lost its rollout.yaml"
    policy = tmp_path / "rollout.yaml"
    policy.write_text(block.group(1), encoding="utf-8")
    assert yaml.safe_load(block.group(1))["version"] == "rollout-1"
    cal = run_calibration([OBSERVED], ["tools.get_export_status.poll.max_polls=5,10"], policy,
                          run_id_attribute=RUN_ATTR)
    current = cal.results[0]
    assert sorted(r.run_id for r in current.runs if r.passed) == ["export-poller", "refund-search", "triage-topics"]
    assert cal.recorded is not None and cal.recorded.tools["get_export_status"].newly_stopped == ["export-poller"]
    five = next(r for r in cal.results if r.name == "tools.get_export_status.poll.max_polls=5")
    assert next(r.stop.seq for r in five.runs if r.run_id == "export-poller" and r.stop) == 6
