"""The installed processor takes a changed policy file for the runs (traces) opened after it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pytest

import otel_loopguard

from .helpers import Stack, captured, decisions, emit_turn, trace_hex

LENIENT = 'version: "lenient-1"\nrepeat: {warn_at: 3, stop_at: 5}\n'
STRICT = 'version: "strict-2"\nrepeat: {warn_at: 2, stop_at: 3}\n'


def _run(stack: Stack, calls: int) -> str:
    """One agent run (a trace) of `calls` identical lookups; its trace id."""
    with stack.tracer.start_as_current_span("agent") as root:
        for _ in range(calls):
            emit_turn(stack.tracer, "genai_tool")
    return format(root.get_span_context().trace_id, "032x")


def _first_decision(stack: Stack, trace: str) -> tuple[int, str]:
    """(the call number of the run's first repeat decision, the policy version it names)."""
    calls = [s for s in stack.tool_spans() if trace_hex(s) == trace]
    for n, span in enumerate(calls, start=1):
        found = decisions(span, "repeat")
        if found:
            return n, found[0]["loopguard.policy.version"]
    raise AssertionError("no repeat decision in the run")


@pytest.mark.parametrize("how", ["file change", "reload_policy()"])
def test_a_changed_policy_file_judges_the_runs_opened_after_it(
    stacks: Callable[..., Stack], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(LENIENT, encoding="utf-8")
    monkeypatch.setenv("OTEL_LOOPGUARD_POLICY_RELOAD_SECONDS", "0.05" if how == "file change" else "0")
    stack = stacks(policy=str(path))
    before = _run(stack, 4)
    stack.spans()  # flushed: the processor has opened that run (it tags on its own thread)
    path.write_text(STRICT, encoding="utf-8")
    if how == "file change":
        time.sleep(0.1)  # past the interval: the next run to open looks at the file
    else:
        assert "strict-2" in otel_loopguard.reload_policy()  # other live sources may answer too
    after = _run(stack, 4)
    assert _first_decision(stack, before) == (3, "lenient-1")
    assert _first_decision(stack, after) == (2, "strict-2")


def test_without_a_reload_the_change_waits(stacks: Callable[..., Stack], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: with OTEL_LOOPGUARD_POLICY_RELOAD_SECONDS=0 the file is not looked at."""
    path = tmp_path / "policy.yaml"
    path.write_text(LENIENT, encoding="utf-8")
    monkeypatch.setenv("OTEL_LOOPGUARD_POLICY_RELOAD_SECONDS", "0")
    stack = stacks(policy=str(path))
    path.write_text(STRICT, encoding="utf-8")
    time.sleep(0.1)
    assert _first_decision(stack, _run(stack, 4)) == (3, "lenient-1")


@pytest.mark.parametrize("raw", ["-1", "soon", "nan"])
def test_a_bad_reload_interval_is_refused_naming_the_variable(stacks: Callable[..., Stack], monkeypatch: pytest.MonkeyPatch,
                                                              raw: str) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_POLICY_RELOAD_SECONDS", raw)
    with pytest.raises(otel_loopguard.errors.LoopguardError, match="OTEL_LOOPGUARD_POLICY_RELOAD_SECONDS"):
        stacks()
