"""Enforce mode in Google ADK (otel_loopguard.enforce.adk.LoopguardPlugin) and Pydantic AI
(otel_loopguard.enforce.pydantic_ai.LoopguardToolset), each driven for real.

Each scenario is one run of <fw>_enforce_agent.py in the framework's virtualenv (.venv-adk:
google-adk pins opentelemetry <1.45; .venv-fw): a scripted model, the adapter, install()
tagging the spans. The fifth identical call is denied before dispatch (the tool never runs,
the model reads the denial), and the next model request is the wrap-up: no tools, the wrap-up
instruction. A healthy run, an observe-only tool, the kill switch and four identical calls (the
mutation check: one call fewer, nothing denied) are the negative controls.

The adapters read no span, but the span the denial lands on is the instrumentation's: each
other instrumentation of docs/frameworks.md (a cell `<adapter>@<instrumentation>`, the driver's
last argument) runs `repeat` and `four` too.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from otel_loopguard.enforce.guard import WRAP_UP

from .fw_labels import ROOT, run_driver

HERE = Path(__file__).resolve().parent
# adapter -> (virtualenv python, driver)
ADAPTERS = {
    "adk": (ROOT / ".venv-adk" / "bin" / "python", HERE / "adk_enforce_agent.py"),
    "pydantic_ai": (ROOT / ".venv-fw" / "bin" / "python", HERE / "pai_enforce_agent.py"),
}
SCENARIOS = ("repeat", "healthy", "observe_tool", "kill_switch", "four")
# the other instrumentations: cell -> (adapter, the driver's instrumentation argument)
CELLS = {"adk@openinference": ("adk", "openinference"), "pydantic_ai@openinference": ("pydantic_ai", "openinference")}
CELL_SCENARIOS = ("repeat", "four")
DENIED = "Not executed: loop guard"
A1 = ["lookup_order", {"order_id": "A-1"}]
READY = [a for a, (python, _) in ADAPTERS.items() if python.exists()]
if not READY:
    # On CI scripts/test.sh has made them: a missing one is a broken setup, not a skip.
    if os.environ.get("CI"):
        pytest.fail(".venv-adk and .venv-fw not found: scripts/test.sh makes them", pytrace=False)
    pytest.skip(".venv-adk and .venv-fw not found: scripts/test.sh makes them", allow_module_level=True)


def _run(cell: str, scenario: str, out: Path) -> dict[str, Any]:
    adapter, instrumentation = CELLS.get(cell, (cell, "builtin"))
    python, script = ADAPTERS[adapter]
    return run_driver(python, script, scenario, out, timeout=120, extra=(instrumentation,))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("enforce_adapters")
    with ThreadPoolExecutor(2) as pool:
        jobs = [(a, s) for a in READY for s in SCENARIOS]
        jobs += [(c, s) for c, (a, _) in CELLS.items() if a in READY for s in CELL_SCENARIOS]
        futures = {(c, s): pool.submit(_run, c, s, folder / f"{c}_{s}.pb") for c, s in jobs}
        yield {k: f.result() for k, f in futures.items()}


def _adapters(cells: bool = False) -> list[Any]:
    """Each adapter (under its framework's built-in spans), and with `cells` each other instrumentation."""
    names = [*ADAPTERS, *CELLS] if cells else list(ADAPTERS)
    return [pytest.param(c, marks=[] if ready else [pytest.mark.skip(reason=f"{ADAPTERS[a][0]} not found")]
                         if not os.environ.get("CI") else [])  # on CI: run, and fail for want of it
            for c in names for a in [CELLS.get(c, (c,))[0]] for ready in [a in READY]]


def _tools(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in run["spans"] if s["name"].startswith("execute_tool ")]


def _decisions(run: dict[str, Any], verb: str) -> list[tuple[int, str]]:
    return [(i, e["loopguard.finding.kind"]) for i, s in enumerate(_tools(run), start=1) for n, e in s["events"]
            if n == "loopguard.decision" and e["loopguard.decision"] == verb and "loopguard.dispatched" in e]


def _returns(run: dict[str, Any]) -> list[str]:
    return [r for req in run["requests"] for r in req["returns"]]


def _wrap_ups(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in run["requests"] if not r["tools"]]


@pytest.mark.parametrize("adapter", _adapters(cells=True))
def test_the_fifth_identical_call_is_denied_and_the_model_gets_the_wrap_up(runs: dict[Any, Any], adapter: str) -> None:
    run = runs[adapter, "repeat"]
    assert run["invoked"] == [A1] * 4  # the fifth call never ran
    assert [r.startswith(DENIED) for r in _returns(run)] == [False] * 4 + [True]
    [wrap] = _wrap_ups(run)
    assert wrap["told"] == WRAP_UP and wrap is run["requests"][-1]
    assert run["final"] == f"wrap-up: {WRAP_UP}"
    tools = _tools(run)
    assert len(tools) == 5
    assert _decisions(run, "deny") == [(5, "repeat")]
    fifth = tools[4]["attributes"]
    assert fifth["loopguard.dispatched"] is False and fifth["loopguard.guard"] == "repeat"
    assert [s["attributes"].get("loopguard.dispatched") for s in tools[:4]] == [None] * 4
    assert {s["attributes"]["loopguard.mode"] for s in tools} == {"enforce"}
    ends = [s["attributes"]["loopguard.termination_reason"] for s in run["spans"]
            if "loopguard.termination_reason" in s["attributes"]]
    assert ends == ["loop_guard"]


@pytest.mark.parametrize("adapter", _adapters(cells=True))
def test_the_calls_before_the_stop_were_nudged(runs: dict[Any, Any], adapter: str) -> None:
    assert [("[loop guard]" in r) for r in _returns(runs[adapter, "repeat"])[:4]] == [False, False, True, True]


@pytest.mark.parametrize("adapter", _adapters())
def test_a_healthy_run_is_untouched(runs: dict[Any, Any], adapter: str) -> None:
    run = runs[adapter, "healthy"]
    assert [t for t, _ in run["invoked"]] == ["lookup_order", "get_shipping", "lookup_order"]
    assert run["final"] == "done" and _wrap_ups(run) == []
    assert not [e for s in _tools(run) for n, e in s["events"] if n == "loopguard.decision"]


@pytest.mark.parametrize("adapter", _adapters(cells=True))
def test_four_identical_calls_are_not_denied(runs: dict[Any, Any], adapter: str) -> None:
    """The mutation check: the repeat scenario with its fifth call removed denies nothing."""
    run = runs[adapter, "four"]
    assert run["invoked"] == [A1] * 4 and run["final"] == "done" and _wrap_ups(run) == []
    assert _decisions(run, "deny") == [] and not [r for r in _returns(run) if r.startswith(DENIED)]
    assert [s["attributes"].get("loopguard.dispatched") for s in _tools(run)] == [None] * 4
    assert not [s for s in run["spans"] if "loopguard.termination_reason" in s["attributes"]]


@pytest.mark.parametrize("adapter", _adapters())
@pytest.mark.parametrize("scenario", ("observe_tool", "kill_switch"))
def test_an_observe_only_tool_and_the_kill_switch_block_nothing(runs: dict[Any, Any], adapter: str,
                                                                 scenario: str) -> None:
    run = runs[adapter, scenario]
    assert run["invoked"] == [A1] * 8 and run["final"] == "done" and _wrap_ups(run) == []
    assert not [r for r in _returns(run) if "loop guard" in r]
    assert _decisions(run, "deny") == []
    assert _decisions(run, "would_block")[0] == (5, "repeat")  # what enforce mode would have done
