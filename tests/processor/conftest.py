from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import pytest

from .helpers import Stack, make_stack


@pytest.fixture(autouse=True)
def _clean_loopguard_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_LOOPGUARD_* setting leaks in from the shell or from another test."""
    for name in list(os.environ):
        if name.startswith("OTEL_LOOPGUARD_"):
            monkeypatch.delenv(name)


@pytest.fixture
def stacks() -> Iterator[Callable[..., Stack]]:
    """make_stack(...), shut down at teardown (worker threads and exporters included)."""
    made: list[Stack] = []

    def factory(**kwargs: Any) -> Stack:
        stack = make_stack(**kwargs)
        made.append(stack)
        return stack

    yield factory
    for stack in made:
        stack.shutdown()


@pytest.fixture
def stack(stacks: Callable[..., Stack]) -> Stack:
    return stacks()
