"""The detector packages import on their own, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _import_fresh(module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)


@pytest.mark.parametrize(
    "module",
    ["otel_loopguard.detect", "otel_loopguard.progress", "otel_loopguard.fingerprint", "otel_loopguard.policy"],
)
def test_each_core_package_imports_first_in_a_fresh_interpreter(module: str) -> None:
    # Guards against the progress <-> fingerprint import cycle coming back.
    result = _import_fresh(module)
    assert result.returncode == 0, result.stderr
