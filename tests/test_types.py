"""The package's type hints hold: it ships py.typed, so users' type checkers read them.

mypy is pinned in the `test` extra (its verdicts change between releases); settings are in
pyproject.toml ([tool.mypy]). The cache lives in .mypy_cache, so a second run is quick.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_type_checks() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout
