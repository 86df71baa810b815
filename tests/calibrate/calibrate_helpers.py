"""Inputs for the calibrate tests (conftest.py holds the fixtures): the bundled examples, the test fixtures, and the recorded
framework captures written as OTLP/JSON by scripts/captures_to_otlp.py (once per session)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "otel_loopguard" / "examples"
FIXTURES = ROOT / "tests" / "fixtures"
KEY = "calibrate-test-key-0123456789"
OBSERVED = EXAMPLES / "observed_agents.otlp.json"
RUN_ATTR = "gen_ai.conversation.id"


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def chromium() -> str:
    """Debian's `chromium` (scripts/test.sh installs it). Missing on CI is a failure, not a skip."""
    import os
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: scripts/test.sh installs Debian's chromium package (apt-get)")
    pytest.skip("chromium is not installed (scripts/test.sh installs it; on CI this test fails instead)")


def dump_dom(page: Path) -> str:
    """The page's DOM after its scripts ran, from headless Chromium (no sandbox: tests run as
    root in containers; no GPU)."""
    import subprocess

    done = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--user-data-dir=" + str(page.parent / "chromium-profile"), "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "<body" in done.stdout, done.stderr[-2000:]
    return done.stdout
