"""Fixtures for the calibrate tests (inputs and helpers live in calibrate_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibrate_helpers import KEY, load_script


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    monkeypatch.delenv("OTEL_LOOPGUARD_KEY_FILE", raising=False)


@pytest.fixture(scope="session")
def captures(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("captures")
    script = load_script("captures_to_otlp")
    files = [script.convert(c, out) for c in script.capture_files()]
    assert len(files) >= 40  # the research captures: every framework x convention x error style
    return files
