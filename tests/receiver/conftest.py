from __future__ import annotations

from typing import Iterator

import pytest

from .harness import Sink


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def _digest_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", "receiver-test-key-0123456789")
