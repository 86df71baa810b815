"""Enforce mode in Google ADK (otel_loopguard.enforce.adk.LoopguardPlugin), driven for real.

Each scenario is one run of adk_enforce_agent.py in .venv-adk (google-adk pins opentelemetry
<1.45): a scripted model, the guard as a runner plugin, install() tagging the spans. The fifth
identical call is denied before dispatch (the tool never runs, the model reads the denial),
and the next model request is the wrap-up: no tools, the wrap-up instruction. A healthy run,
an observe-only tool and the kill switch are the negative controls.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from otel_loopguard.enforce.guard import WRAP_UP

from .fw_labels import ROOT, read_spans

ADK_PYTHON = ROOT / ".venv-adk" / "bin" / "python"
SCRIPT = Path(__file__).resolve().with_name("adk_enforce_agent.py")
SCENARIOS = ("repeat", "healthy", "observe_tool", "kill_switch")
DENIED = "Not executed: loop guard"
A1 = ["lookup_order", {"order_id": "A-1"}]

if not ADK_PYTHON.exists():
    pytest.skip(".venv-adk not found: scripts/test.sh makes it (VENV=.venv-adk bash scripts/setup.sh adk)",
                allow_module_level=True)


def _run(scenario: str, out: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GOOGLE_", "PYTHON"))}
    proc = subprocess.run([str(ADK_PYTHON), str(SCRIPT), scenario, str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{scenario}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    result = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return {**result, "spans": read_spans(out)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("adk_enforce")
    with ThreadPoolExecutor(2) as pool:
        futures = {s: pool.submit(_run, s, folder / f"{s}.pb") for s in SCENARIOS}
        yield {s: f.result() for s, f in futures.items()}


def _tools(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in run["spans"] if s["name"].startswith("execute_tool ")]


def _decisions(run: dict[str, Any], verb: str) -> list[tuple[int, str]]:
    return [(i, e["loopguard.finding.kind"]) for i, s in enumerate(_tools(run), start=1) for n, e in s["events"]
            if n == "loopguard.decision" and e["loopguard.decision"] == verb and "loopguard.dispatched" in e]


def _wrap_ups(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in run["requests"] if not r["tools"]]


def test_the_fifth_identical_call_is_denied_and_the_model_gets_the_wrap_up(runs: dict[str, Any]) -> None:
    run = runs["repeat"]
    assert run["invoked"] == [A1] * 4  # the fifth call never ran
    denied = [r for req in run["requests"] for r in req["responses"] if str(r.get("result", "")).startswith(DENIED)]
    assert len(denied) == 1
    [wrap] = _wrap_ups(run)
    assert wrap["last_user"] == WRAP_UP and wrap is run["requests"][-1]
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


def test_the_calls_before_the_stop_were_nudged(runs: dict[str, Any]) -> None:
    results = [str(r.get("result")) for req in runs["repeat"]["requests"] for r in req["responses"]]
    assert [("[loop guard]" in r) for r in results[:4]] == [False, False, True, True]


def test_a_healthy_run_is_untouched(runs: dict[str, Any]) -> None:
    run = runs["healthy"]
    assert [t for t, _ in run["invoked"]] == ["lookup_order", "get_shipping", "lookup_order"]
    assert run["final"] == "done" and _wrap_ups(run) == []
    assert not [e for s in _tools(run) for n, e in s["events"] if n == "loopguard.decision"]


@pytest.mark.parametrize("scenario", ("observe_tool", "kill_switch"))
def test_an_observe_only_tool_and_the_kill_switch_block_nothing(runs: dict[str, Any], scenario: str) -> None:
    run = runs[scenario]
    assert run["invoked"] == [A1] * 8 and run["final"] == "done" and _wrap_ups(run) == []
    assert not [r for req in run["requests"] for r in req["responses"] if "loop guard" in str(r)]
    assert _decisions(run, "deny") == []
    assert _decisions(run, "would_block")[0] == (5, "repeat")  # what enforce mode would have done
