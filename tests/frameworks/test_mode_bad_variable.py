"""A bad OTEL_LOOPGUARD_MODE set while the agent runs never raises into a tool call, on all
three adapters (issue 28, defect 6): the guard keeps the last good mode (here enforce)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from .rollout_harness import drive, same_answer  # noqa: E402,F401

POLICY = "version: mode-1\n"
A12 = ("lookup_order", {"order_id": "A12"})


def test_a_bad_mode_variable_mid_run_keeps_enforcing(drive: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def behave(tool: str, args: dict) -> Any:
        monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "bogus")  # set by someone while the agent runs
        return same_answer(tool, args)

    out = drive(POLICY, [[A12] for _ in range(6)], behave=behave)
    assert out.count("lookup_order") == 4 and out.denied() == [5, 6]
