"""Budgets, caps and poll budgets warn the model at `warn_ratio`, in the one nudge format every
adapter shares: `[loop guard] <reason>. Change your approach: ...`, appended to a text result
after a blank line, or under `loop_guard_notice` in a dict the decorator returns (docs/guard.md).

Driven through the decorator, the OpenAI Agents SDK and LangChain with scripted models (the
adapters of test_rollout.py), each with a negative control below the warn level.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from otel_loopguard.enforce import make_guard  # noqa: E402

from . import test_rollout as rollout  # noqa: E402

NUDGE = "[loop guard] "
FOLLOW = ". Change your approach: use different arguments, another tool, or answer with what you already have."


@pytest.fixture(params=sorted(rollout.ADAPTERS))
def drive(request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    for name in [n for n in __import__("os").environ if n.startswith("OTEL_LOOPGUARD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-no-network")
    monkeypatch.setenv("TRACELOOP_METRICS_ENABLED", "false")

    def run(policy: str, turns: list) -> Any:
        path = tmp_path / "policy.yaml"
        path.write_text(policy, encoding="utf-8")
        return rollout.ADAPTERS[request.param](make_guard(key=rollout.KEY, policy=str(path)), turns)

    return run


def _lookups(n: int) -> list:
    return [[("lookup_order", {"order_id": f"A{i}"})] for i in range(n)]


def _nudges(out: Any) -> list:
    return [i for i, o in enumerate(out.outputs, start=1) if NUDGE in o]


def test_a_cap_warns_from_warn_ratio_then_refuses(drive: Any) -> None:
    out = drive("version: n1\ntools:\n  lookup_order: {max_calls: 5}\n", _lookups(6))
    assert out.count("lookup_order") == 5 and out.denied() == [6]
    assert _nudges(out)[:2] == [4, 5]  # calls 4 and 5 of 5 (warn_ratio 0.8), not 3
    assert NUDGE + "this is call 4 of the 5 lookup_order may make per run" + FOLLOW in out.outputs[3]
    assert [d[:2] for d in out.decisions[:2]] == [("warn", "tool_cap")] * 2


def test_a_call_budget_warns_from_warn_ratio_then_refuses(drive: Any) -> None:
    out = drive("version: n2\nbudget: {max_tool_calls: 5, max_turns: null, max_seconds: null}\n", _lookups(6))
    assert out.count("lookup_order") == 5 and out.denied() == [6]
    assert _nudges(out)[:2] == [4, 5]
    assert NUDGE + "this is tool call 4 of the 5 the run may make" in out.outputs[3]


def test_a_poll_budget_warns_from_warn_ratio(drive: Any) -> None:
    policy = ("version: n3\ntools:\n  get_shipping:\n    exempt_repeat: true\n    poll: {max_polls: 5}\n"
              "    progress: {state_field: state, terminal_states: [delivered]}\n")
    out = drive(policy, [[("get_shipping", {"order_id": "A12"})] for _ in range(6)])
    assert _nudges(out)[:2] == [4, 5]
    assert NUDGE + "this is poll 4 of the 5 get_shipping may make without reaching a terminal state" in out.outputs[3]
    assert out.count("get_shipping") == 5 and out.denied() == [6]  # the 5th used the budget up


def test_negative_control_below_the_warn_level_nothing_is_nudged(drive: Any) -> None:
    out = drive("version: n4\ntools:\n  lookup_order: {max_calls: 5}\n"
                "budget: {max_tool_calls: 10, max_turns: null, max_seconds: null}\n", _lookups(3))
    assert _nudges(out) == [] and out.denied() == [] and out.decisions == []
