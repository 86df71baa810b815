from __future__ import annotations

from typing import Iterator

import pytest

from collector.backend import CountingBackend


@pytest.fixture
def backend() -> Iterator[CountingBackend]:
    b = CountingBackend()
    yield b
    b.down()
