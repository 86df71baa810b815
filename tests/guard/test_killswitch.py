"""The runtime kill switch: enforce mode off at once, no restart, by call or by file.

The fake tool counts its own invocations, so a switch that only relabels the decision but
still denies (or the reverse) fails.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_loopguard
from otel_loopguard import killswitch
from otel_loopguard.enforce import make_guard
from otel_loopguard.killswitch import ENV_FILE, KillSwitch

KEY = b"guard-test-key-0123456789"


@pytest.fixture(autouse=True)
def _switch_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts and ends with the process-wide switch off (it outlives a test otherwise)."""
    monkeypatch.delenv(ENV_FILE, raising=False)
    killswitch.SWITCH = KillSwitch()
    yield
    killswitch.SWITCH = KillSwitch()


def _looping_tool() -> tuple[Callable[[], Any], list[str], InMemorySpanExporter, Any]:
    """A guarded tool called inside one trace (one run), and what it really ran."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("killswitch-test")
    guard, invoked = make_guard(key=KEY), []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered", "version": 7}

    root = tracer.start_span("invoke_agent")

    def call() -> Any:
        from opentelemetry import trace

        with trace.use_span(root, end_on_exit=False):
            return lookup_order("A12")

    return call, invoked, exporter, root


def _verbs(root: Any, exporter: InMemorySpanExporter) -> list[str]:
    root.end()
    (span,) = exporter.get_finished_spans()
    return [str(e.attributes["loopguard.decision"]) for e in span.events if e.name == "loopguard.decision"]


def test_set_mode_observe_stops_denying_at_once_and_enforce_brings_it_back() -> None:
    call, invoked, exporter, root = _looping_tool()
    results = [call() for _ in range(5)]
    assert len(invoked) == 4 and str(results[4]).startswith("Not executed")  # negative control: it denies

    otel_loopguard.set_mode("observe")
    after = [call() for _ in range(2)]
    assert len(invoked) == 6  # both ran: nothing is denied while the switch is on
    assert all(r == {"status": "delivered", "version": 7} for r in after)  # no nudge either

    otel_loopguard.set_mode("enforce")
    assert str(call()).startswith("Not executed") and len(invoked) == 6  # the run is still stopped
    # deny (5th), would_block twice under the switch, deny again; plus the warns before
    assert _verbs(root, exporter)[-4:] == ["deny", "would_block", "would_block", "deny"]


def test_the_kill_switch_file_forces_observe_only_within_a_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    switch_file = tmp_path / "loopguard-off"
    monkeypatch.setenv(ENV_FILE, str(switch_file))
    call, invoked, exporter, root = _looping_tool()
    results = [call() for _ in range(5)]
    assert len(invoked) == 4 and str(results[4]).startswith("Not executed")  # file absent: enforcing

    switch_file.touch()
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        time.sleep(killswitch.CHECK_SECONDS + 0.1)
        call()
    assert len(invoked) == 5  # the file is there: the looping call ran
    assert any("kill switch ON" in r.getMessage() for r in caplog.records)

    switch_file.unlink()
    time.sleep(killswitch.CHECK_SECONDS + 0.1)
    assert str(call()).startswith("Not executed") and len(invoked) == 5
    assert _verbs(root, exporter)[-3:] == ["deny", "would_block", "deny"]


def test_the_file_is_looked_at_at_most_once_per_interval_and_beats_set_mode_enforce(tmp_path: Path) -> None:
    now = [100.0]
    path = tmp_path / "off"
    switch = KillSwitch(env={ENV_FILE: str(path)}, clock=lambda: now[0], interval=1.0)
    assert switch.observe_only() is False
    path.touch()
    assert switch.observe_only() is False  # within the interval: the last look stands
    now[0] += 1.0
    assert switch.observe_only() is True
    switch.set_mode("enforce")
    assert switch.observe_only() is True and switch.mode("enforce") == "observe"  # the file wins
    path.unlink()
    now[0] += 1.0
    assert switch.observe_only() is False and switch.mode("enforce") == "enforce"


def test_set_mode_refuses_other_modes() -> None:
    with pytest.raises(ValueError, match="observe, enforce"):
        otel_loopguard.set_mode("off")
    assert killswitch.observe_only() is False


def test_the_processor_tags_observe_while_the_switch_is_on() -> None:
    from tests.processor.helpers import emit_turn, make_stack, tags

    stack = make_stack(mode="enforce")
    try:
        emit_turn(stack.tracer, "genai_tool")
        stack.spans()  # tagged by the worker thread: flushed before the switch, as in life ms later
        otel_loopguard.set_mode("observe")
        emit_turn(stack.tracer, "genai_tool")
        modes = [tags(s)["loopguard.mode"] for s in stack.tool_spans()]
    finally:
        stack.shutdown()
    assert modes == ["enforce", "observe"]
