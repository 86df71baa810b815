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
