"""The sink every proxy test sends its spans to (harness.Sink, an in-process OTLP/gRPC server)."""

from __future__ import annotations

from typing import Iterator

import pytest

from harness import Sink


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.stop()
