"""Which tier runs (tests/conftest.py): the fast tier (LOOPGUARD_FAST=1, `bash scripts/test.sh
--fast`) draws fewer generated examples and cases in the largest property, differential and
replay tests; the full suite, which CI runs, draws them all. What each test asserts is the same
in both tiers: only how many inputs it asserts it on changes."""

from __future__ import annotations

import os

FAST = os.environ.get("LOOPGUARD_FAST", "") not in ("", "0")


def examples(full: int) -> int:
    """Hypothesis examples for a property test: all of them, or a fifth in the fast tier."""
    return max(30, full // 5) if FAST else full


def cases(full: int, share: int = 5) -> int:
    """Cases of a seeded loop (or inputs of a replay): all of them, or `1/share` in the fast tier."""
    return max(1, full // share) if FAST else full
