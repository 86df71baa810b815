"""The bundled demo and the CLI entry point work end to end."""

import subprocess
import sys


def test_demo_reports_the_looping_run_and_passes_the_guarded_one() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "otel_loopguard.cli", "demo"], capture_output=True, text=True, check=True
    ).stdout
    assert "RUN support-order-A12  outcome=scored  release=FAIL" in out
    assert "stop repeat              seq 1-5      x5" in out
    assert "RUN guarded-lookup  outcome=scored  release=PASS" in out
    assert "RUN search-refunds  outcome=scored  release=PASS" in out


def test_live_demo_flags_the_looping_agents_and_clears_the_healthy_one() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "otel_loopguard.cli", "demo"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    live = out.split("== 2.")[0]
    assert "support agent stuck on one order           stop     repeat             1-5" in live
    assert "planner ping-ponging between two tools     stop     cycle              1-6" in live
    assert "extractor failing on every file            stop     error_streak       1-4" in live
    assert "search agent paging through results        -        none" in live
    assert "OTEL_LOOPGUARD_KEY" not in out and "hex:" not in out  # the demo key is never shown
