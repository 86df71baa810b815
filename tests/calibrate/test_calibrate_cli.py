"""`otel-loopguard calibrate` and `audit --format html` as real subprocesses: the per-tool
table, the JSON document on stdout, the HTML file, and exit status 2 with one line naming a
bad sweep or a bad file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from calibrate_helpers import EXAMPLES, KEY, OBSERVED, RUN_ATTR


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OTEL_LOOPGUARD_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "otel_loopguard.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_the_text_report_is_a_table_per_tool(tmp_path: Path) -> None:
    done = _cli("calibrate", str(OBSERVED), "--run-id-attribute", RUN_ATTR, "--sweep", "repeat.stop_at=4..6",
                "--sweep", "tools.search_cases.max_calls=5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("CALIBRATE  4 runs, 4 candidates, recorded guard decisions")
    lookup = out.split("TOOL lookup_order\n", 1)[1].split("\n\n", 1)[0].splitlines()
    rows = {line.split()[0]: line.split() for line in lookup[1:]}
    assert list(rows) == ["recorded", "current", "repeat.stop_at=4", "repeat.stop_at=5", "repeat.stop_at=6",
                          "tools.search_cases.max_calls=5"]
    assert rows["current"][1:5] == ["1", "1", "support-A12:5", "3"]  # warn runs, stop runs, where, calls saved
    assert rows["repeat.stop_at=4"][3:5] == ["support-A12:4", "4"]
    assert "+refund-search,triage-topics" in out.split("TOOL search_cases\n", 1)[1].split("\n\n", 1)[0]
    assert "to fail: refund-search" in out.split("VERDICTS", 1)[1]


def test_json_on_stdout_and_html_to_a_file(tmp_path: Path) -> None:
    files = [str(p) for p in sorted(EXAMPLES.glob("*.ndjson"))]
    done = _cli("calibrate", *files, "--sweep", "repeat.stop_at=3,7", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [c["name"] for c in doc["candidates"]] == ["current", "repeat.stop_at=3", "repeat.stop_at=7"]
    assert doc["candidates"][2]["tools"][0]["no_longer_stopped"] == ["support-order-A12"]
    page = tmp_path / "report.html"
    done = _cli("calibrate", *files, "--sweep", "repeat.stop_at=3,7", "--format", "html", "-o", str(page),
                cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert page.read_text(encoding="utf-8").count('<svg class="timeline"') == 3


def test_bad_sweeps_and_files_exit_2_with_one_line(tmp_path: Path) -> None:
    files = [str(EXAMPLES / "looping_agent.ndjson")]
    for args, words in ((["--sweep", "tools.x.ignore_fields=a"], "change fingerprints"),
                        (["--sweep", "repeat.stop_at=0"], "integer >= 1"),
                        (["--sweep", "repeat.stop_at=three"], "integer >= 1")):
        done = _cli("calibrate", *files, *args, cwd=tmp_path)
        assert done.returncode == 2 and words in done.stderr and done.stdout == "", (args, done.stderr)
        assert done.stderr.count("\n") == 1
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"sequence": 1}\n', encoding="utf-8")
    done = _cli("calibrate", str(bad), cwd=tmp_path)
    assert done.returncode == 2 and f"{bad}:1: missing field" in done.stderr
    empty = tmp_path / "empty.ndjson"
    empty.write_text("\n", encoding="utf-8")
    done = _cli("calibrate", str(empty), cwd=tmp_path)
    assert done.returncode == 3 and "nothing to calibrate" in done.stderr and done.stdout == ""


def test_audit_html_keeps_the_exit_status(tmp_path: Path) -> None:
    files = [str(p) for p in sorted(EXAMPLES.glob("*.ndjson"))]
    done = _cli("audit", *files, "--format", "html", cwd=tmp_path)
    assert done.returncode == 1  # a run fails the release rule, whatever the format
    assert done.stdout.startswith("<!DOCTYPE html>") and done.stdout.count('<svg class="timeline"') == 3
    healthy = _cli("audit", str(EXAMPLES / "healthy_pagination.ndjson"), "--format", "html", cwd=tmp_path)
    assert healthy.returncode == 0 and "uncontained_loop" not in healthy.stdout
