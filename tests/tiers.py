"""Which tier runs (tests/conftest.py): the fast tier (LOOPGUARD_FAST=1, `bash scripts/test.sh
--fast`) draws fewer generated examples in the largest property tests; the full suite, which CI
runs, draws them all."""

from __future__ import annotations

import os

FAST = os.environ.get("LOOPGUARD_FAST", "") not in ("", "0")


def examples(full: int) -> int:
    """Hypothesis examples for a property test: all of them, or a fifth in the fast tier."""
    return max(30, full // 5) if FAST else full
