"""Fixtures for the audit tests (helpers live in audit_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_helpers import Audit


@pytest.fixture
def audit(tmp_path: Path) -> Audit:
    """Runs `otel-loopguard audit` in a subprocess, cwd tmp_path, OTEL_LOOPGUARD_KEY fixed."""
    return Audit(tmp_path)


@pytest.fixture
def audit_fast(tmp_path: Path) -> Audit:
    """The same CLI entry point (`otel_loopguard.cli.main`) run in this process."""
    return Audit(tmp_path, in_process=True)
