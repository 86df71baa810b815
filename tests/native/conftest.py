"""tests/native/ compares the Rust module with the Python reference. Without the module the
tests skip, except on CI (CI=true) with cargo present: then its absence is a failure, never a
silent skip (scripts/native.sh should have built it)."""

from __future__ import annotations

import os
import shutil

import pytest

from otel_loopguard import native


def require_native() -> None:
    if native.AVAILABLE:
        return
    why = (f"the native module is not in use ({native.PURE_ENV} set, or not built: bash scripts/native.sh)")
    if os.environ.get("CI") == "true" and shutil.which("cargo") and not os.environ.get(native.PURE_ENV):
        pytest.fail("CI with cargo present: " + why, pytrace=False)
    pytest.skip(why)


@pytest.fixture(autouse=True)
def _native_required() -> None:
    require_native()
