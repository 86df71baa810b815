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
