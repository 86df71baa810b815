"""Each test starts with the budget levels' cache empty: a level cached by an earlier test
would hide a wrong `warn_at` from this one (mutation testing, docs/testing.md, forks its
workers from a process that already ran the suite once)."""

from __future__ import annotations

from typing import Iterator

import pytest

from otel_loopguard.detect import budgets


@pytest.fixture(autouse=True)
def _fresh_budget_levels() -> Iterator[None]:
    budgets._levels.cache_clear()
    yield
