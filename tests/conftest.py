"""Suite-wide: a heartbeat for long tests, when scripts/test.sh asks for one.

With OTEL_LOOPGUARD_TEST_HEARTBEAT=N (seconds), a test still running after N seconds says so
on stderr every N seconds, so the README's test command is never silent for long (the end-to-end
tests run real servers for up to a minute). Off otherwise: a plain pytest run prints as usual.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Iterator

import pytest

_EVERY = float(os.environ.get("OTEL_LOOPGUARD_TEST_HEARTBEAT") or 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    if _EVERY <= 0:
        yield
        return
    done = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not done.wait(_EVERY):
            print(f"\n  ... still running {item.nodeid} ({time.monotonic() - t0:.0f} s)", file=sys.__stderr__, flush=True)

    thread = threading.Thread(target=beat, daemon=True, name="test-heartbeat")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(1)
