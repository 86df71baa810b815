"""`calibrate --sweep tools.<tool>.loose_cycle=false` on the recorded public-report runs: the
switch of detect/spread.py shows its effect where, and only where, the loose cycle is what
stops a run (case 013: the same failing `cargo test` between reads of ever new files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_loopguard.calibrate.command import run_calibration

PUBLIC = Path(__file__).resolve().parent / "public"
LOOPS = sorted(PUBLIC.glob("0*.ndjson"))


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", "corpus-sweep-key-0123456789abcdef")


def test_sweeping_loose_cycle_lets_through_only_the_run_it_alone_stopped() -> None:
    cal = run_calibration(LOOPS, ["tools.bash.loose_cycle=false,true", "tools.shell.loose_cycle=false"])
    by_name = {r.name: r for r in cal.results}
    assert by_name["tools.bash.loose_cycle=false"].to_pass == ["public-013-stella-test-interleaved-reads"]
    assert by_name["tools.bash.loose_cycle=false"].to_fail == []
    for name in ("tools.bash.loose_cycle=true", "tools.shell.loose_cycle=false"):  # controls: no change
        assert by_name[name].to_pass == by_name[name].to_fail == [], name


def test_without_the_loose_cycle_the_burst_rewrites_only_warn() -> None:
    """Case 034: two bursts of identical writes with one read between. In a row, each burst
    only reaches the repeat warn; the loose cycle is what stops it."""
    cal = run_calibration(LOOPS, ["tools.write.loose_cycle=false"])
    current, off = cal.results[0], cal.results[1]
    assert all(r.passed is False for r in current.runs if r.run_id.startswith("public-034-"))
    assert off.to_pass == ["public-034-localharness-identical-rewrites"] and off.to_fail == []
