"""On CI with cargo present, a missing native module fails tests/native instead of skipping it;
elsewhere it skips (the package then runs on the Python path)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The module made unimportable in a child pytest, which then runs one differential test.
CHILD = ("import sys; sys.modules['otel_loopguard_native'] = None; import pytest; "
         "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
         "'tests/native/test_digest_differential.py::test_native_prefix_digests_equal_the_python_key']))")


def _child(ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "OTEL_LOOPGUARD_PURE_PYTHON")}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="the rule is about machines with cargo")
def test_a_missing_module_fails_on_ci_and_skips_elsewhere() -> None:
    on_ci = _child(ci=True)
    assert on_ci.returncode == 1 and "CI with cargo present" in on_ci.stdout, on_ci.stdout[-2000:]
    local = _child(ci=False)
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout[-2000:]
