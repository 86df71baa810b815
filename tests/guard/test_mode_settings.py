"""The mode setting and the guard's tool calls (issue 28, defect 6): a bad OTEL_LOOPGUARD_MODE
set while a guard exists never raises into the call (the last good mode is kept and the bad
value logged once); at guard() time it is the ModeError it is, naming the variable."""

from __future__ import annotations

import logging
import os

import pytest

from otel_loopguard.enforce import make_guard
from otel_loopguard.mode import ModeError
from otel_loopguard.processor.config import ProcessorConfigError

KEY = "mode-settings-key-5Tq9Wc2x"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_LOOPGUARD_")]:
        monkeypatch.delenv(name)


def _loop(guard, n: int = 6) -> list[str]:
    ran: list[str] = []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        ran.append(order_id)
        return {"status": "delivered"}

    with guard.run("mode-settings"):
        return [str(lookup_order("A12")) for _ in range(n)]


def test_a_bad_variable_set_after_the_guard_exists_keeps_the_last_good_mode(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "observe")
    guard = make_guard(key=KEY)
    assert guard.mode == "observe"
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "bogus-once")  # a value no other test logged
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        outputs = _loop(guard)  # never raises into the tool call
        assert guard.mode == "observe"
    assert not any(o.startswith("Not executed") for o in outputs)  # observe: the last good mode
    logged = [r for r in caplog.records if "OTEL_LOOPGUARD_MODE" in r.getMessage() and "bogus-once" in r.getMessage()]
    assert len(logged) == 1  # once, not at every call


def test_a_bad_variable_keeps_enforcing_when_enforcing_was_the_last_good_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = make_guard(key=KEY)  # nothing set: enforce
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "enforse")
    outputs = _loop(guard)
    assert [i for i, o in enumerate(outputs, 1) if o.startswith("Not executed")] == [5, 6]
    # Fixed again: the next call follows it.
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "observe")
    assert guard.mode == "observe"


def test_a_bad_variable_at_guard_time_is_a_mode_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "bogus")
    with pytest.raises(ModeError, match="OTEL_LOOPGUARD_MODE: expected one of observe, enforce, got 'bogus'") as caught:
        make_guard(key=KEY)
    assert not isinstance(caught.value, ProcessorConfigError)


def test_a_guard_with_its_own_mode_does_not_read_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the variable only matters to guards without a mode of their own."""
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "bogus")
    assert make_guard(key=KEY, mode="observe").mode == "observe"
