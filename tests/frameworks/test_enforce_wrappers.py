"""Enforce mode in CrewAI (otel_loopguard.enforce.crewai.LoopguardHooks), smolagents and LlamaIndex
(otel_loopguard.enforce.smolagents / .llamaindex `guard_tools`), each driven for real.

Each scenario is one run of <fw>_enforce_agent.py in .venv-fw (enforce_common.py: a scripted
model, the adapter, OpenInference's instrumentation, install() tagging the spans). The fifth
identical call is denied before dispatch: its body never runs and it opens no tool span (the
denial is a `loopguard.decision` event on the span around it); the model's next request carries
the wrap-up instruction and the run ends on its answer. A healthy run, an observe-only tool, the
kill switch and four identical calls (the mutation check: one call fewer, nothing denied) are the
negative controls.

The adapters read no span, but where the denial lands depends on the instrumentation: each
other instrumentation of docs/frameworks.md (a cell `<adapter>@<instrumentation>`, the driver's
last argument) runs `repeat` and `four` too.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from otel_loopguard.enforce.guard import WRAP_UP

from .fw_labels import ROOT, run_driver

HERE = Path(__file__).resolve().parent
PYTHON = ROOT / ".venv-fw" / "bin" / "python"
# adapter -> (driver, its extra arguments)
ADAPTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "crewai": ("crew_enforce_agent.py", ()),
    "smolagents": ("smol_enforce_agent.py", ()),
    "llamaindex": ("li_enforce_agent.py", ()),
}
SCENARIOS = ("repeat", "healthy", "observe_tool", "kill_switch", "four", "errors", "parallel")
# smolagents' CodeAgent, whose code calls the wrapped tools: made with guard_tools (no turns),
# and under guard_agent, whose turn is the agent's step (a code block's calls run one by one)
EXTRA: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("smolagents_code", "repeat"): ("smol_enforce_agent.py", ("code_tools",)),
    ("smolagents_code", "parallel"): ("smol_enforce_agent.py", ("code",)),
}
# the other instrumentations: cell -> (adapter, the driver's instrumentation argument, scenarios)
CELLS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "crewai@openinference_events": ("crewai", "openinference_events", ("repeat", "four")),
    "crewai@traceloop": ("crewai", "traceloop", ("repeat", "four", "observe")),
    "llamaindex@traceloop": ("llamaindex", "traceloop", ("repeat", "four")),
}
DENIED = "Not executed: loop guard"
A1 = ["lookup_order", {"order_id": "A-1"}]
if not PYTHON.exists():
    # On CI scripts/test.sh has made it: a missing one is a broken setup, not a skip.
    if os.environ.get("CI"):
        pytest.fail(".venv-fw not found: scripts/test.sh makes it", pytrace=False)
    pytest.skip(".venv-fw not found: scripts/test.sh makes it", allow_module_level=True)


def _run(driver: str, extra: tuple[str, ...], scenario: str, out: Path) -> dict[str, Any]:
    return run_driver(PYTHON, HERE / driver, scenario, out, timeout=180, extra=extra)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("enforce_wrappers")
    jobs = {(a, s): (*ADAPTERS[a], s) for a in ADAPTERS for s in SCENARIOS}
    jobs.update({k: (*v, k[1]) for k, v in EXTRA.items()})
    jobs.update({(c, s): (ADAPTERS[a][0], (i,), s) for c, (a, i, scenarios) in CELLS.items() for s in scenarios})
    with ThreadPoolExecutor(2) as pool:
        futures = {k: pool.submit(_run, d, x, s, folder / f"{k[0]}_{s}.pb") for k, (d, x, s) in jobs.items()}
        yield {k: f.result() for k, f in futures.items()}


def _tools(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool spans install() tagged, in call order."""
    return sorted((s for s in run["spans"] if "loopguard.tool.name" in s["attributes"]),
                  key=lambda s: s["attributes"]["loopguard.seq"])


def _lookups(run: dict[str, Any]) -> list[dict[str, Any]]:
    """lookup_order's tool spans (smolagents' final answer is a tool call of its own)."""
    return [s for s in _tools(run) if s["attributes"]["loopguard.tool.name"] == "lookup_order"]


def _adapter_decisions(run: dict[str, Any], verb: str) -> list[dict[str, Any]]:
    """The adapter's decision events (the processor's own carry no `loopguard.dispatched`)."""
    return [e for s in run["spans"] for n, e in s["events"]
            if n == "loopguard.decision" and e["loopguard.decision"] == verb and "loopguard.dispatched" in e]


def _processor_decisions(run: dict[str, Any], verb: str) -> list[tuple[int, str]]:
    return [(s["attributes"]["loopguard.seq"], e["loopguard.finding.kind"]) for s in _tools(run)
            for n, e in s["events"] if n == "loopguard.decision" and e["loopguard.decision"] == verb]


def _returns(run: dict[str, Any]) -> list[str]:
    return [r for req in run["requests"] for r in req["returns"]]


def _wrap_ups(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in run["requests"] if r["told"] == WRAP_UP]


def _ends(run: dict[str, Any]) -> list[str]:
    return [s["attributes"]["loopguard.termination_reason"] for s in run["spans"]
            if "loopguard.termination_reason" in s["attributes"]]


def _around(run: dict[str, Any], verb: str) -> list[dict[str, Any]]:
    """The spans carrying the adapter's `verb` decisions."""
    return [s for s in run["spans"] if any(n == "loopguard.decision" and e["loopguard.decision"] == verb
                                           and "loopguard.dispatched" in e for n, e in s["events"])]


def _assert_denied_and_wrapped_up(run: dict[str, Any]) -> None:
    assert run["invoked"] == [A1] * 4  # the fifth call's body never ran
    assert [r.startswith(DENIED) for r in _returns(run)] == [False] * 4 + [True]
    [wrap] = _wrap_ups(run)
    assert wrap is run["requests"][-1] and run["final"] == f"wrap-up: {WRAP_UP}"


# Where the denial lands besides the default (no tool span for the denied call, the event on the
# span around it): OpenLLMetry's LlamaIndex traces the workflow's `call_tool` step, the call's one
# tool span, which the denial marks not dispatched; OpenLLMetry's CrewAI writes no tool span (the
# agent's span is around the call).
DENIAL_SPAN = {"crewai@traceloop": "agent", "llamaindex@traceloop": "marked"}


@pytest.mark.parametrize("cell", [*ADAPTERS, *DENIAL_SPAN])
def test_the_fifth_identical_call_is_denied_before_dispatch_and_the_model_gets_the_wrap_up(
        runs: dict[Any, Any], cell: str) -> None:
    run = runs[cell, "repeat"]
    _assert_denied_and_wrapped_up(run)
    [deny] = _adapter_decisions(run, "deny")
    assert deny["loopguard.finding.kind"] == "repeat" and deny["loopguard.dispatched"] is False
    assert deny["loopguard.tool.name"] == "lookup_order"
    assert _ends(run) == ["loop_guard"]
    [around] = _around(run, "deny")
    assert around["trace_id"] == run["spans"][0]["trace_id"]  # exported in the run's trace
    tools = _lookups(run)
    assert {s["attributes"]["loopguard.mode"] for s in tools} == ({"enforce"} if tools else set())
    where = DENIAL_SPAN.get(cell)
    if where == "agent":
        assert tools == [] and around["attributes"]["traceloop.span.kind"] == "agent"
    elif where == "marked":
        assert len(tools) == 5 and around is tools[4]
        assert [s["attributes"].get("loopguard.dispatched") for s in tools] == [None] * 4 + [False]
        assert around["attributes"]["loopguard.guard"] == "repeat"
    else:
        # the denied call opened no tool span
        assert len(tools) == 4 and "loopguard.tool.name" not in around["attributes"]


@pytest.mark.parametrize("cell", [*ADAPTERS, *DENIAL_SPAN])
def test_the_calls_before_the_stop_were_nudged(runs: dict[Any, Any], cell: str) -> None:
    run = runs[cell, "repeat"]
    assert [("[loop guard]" in r) for r in _returns(run)[:4]] == [False, False, True, True]
    assert len(_adapter_decisions(run, "warn")) == 2


def test_under_crewai_s_event_listener_the_call_is_denied_but_no_span_records_it(runs: dict[Any, Any]) -> None:
    """OpenInference's CrewAI event listener opens its spans from CrewAI's events and makes none
    current, so the hooks have no span to record on: the call is denied and the wrap-up sent, but
    the decisions and the run's ending are not exported, and the denied call's tool span (opened
    from CrewAI's tool events, the guard's message its output) reads as a call that ran. The
    guard judged the run as the crew's (no trace is current), so install() tags the spans as a
    run no enforcing guard judged."""
    run = runs["crewai@openinference_events", "repeat"]
    _assert_denied_and_wrapped_up(run)
    assert _adapter_decisions(run, "deny") == [] and _adapter_decisions(run, "warn") == [] and _ends(run) == []
    tools = _lookups(run)
    assert len(tools) == 5 and tools[4]["attributes"]["output.value"].startswith(DENIED)
    assert "loopguard.dispatched" not in tools[4]["attributes"]
    assert {s["attributes"]["loopguard.mode"] for s in tools} == {"observe"}


def test_crewai_openllmetry_observe_only_hooks(runs: dict[Any, Any]) -> None:
    """OpenLLMetry's CrewAI instrumentation writes no tool span, so install() has no call to
    judge; the hooks with an observe-only guard record what enforce mode would do as events on the
    agent's span: `would_warn` at the third and fourth calls, `would_block` at the fifth."""
    run = runs["crewai@traceloop", "observe"]
    assert not [s for s in run["spans"] if "loopguard.tool.name" in s["attributes"]]
    # observe-only: nothing denied or nudged; CrewAI stops the run itself after the fifth call ran
    assert run["invoked"] == [A1] * 5 and run["final"].startswith("error: ToolExecutionFailedError")
    assert not [r for r in _returns(run) if "loop guard" in r] and _wrap_ups(run) == [] and _ends(run) == []
    [agent] = _around(run, "would_block")
    assert agent["attributes"]["traceloop.span.kind"] == "agent"
    decisions = [e for n, e in agent["events"] if n == "loopguard.decision"]
    assert [(e["loopguard.decision"], e["loopguard.finding.kind"], e["loopguard.dispatched"]) for e in decisions] == [
        ("would_warn", "repeat", True)] * 2 + [("would_block", "repeat", True)]
    assert _adapter_decisions(run, "deny") == [] and _adapter_decisions(run, "warn") == []


def test_a_code_agent_s_code_reaches_the_wrapped_tools(runs: dict[Any, Any]) -> None:
    """smolagents' CodeAgent: the code it writes calls the wrappers; the fifth call is denied
    and the run stopped (its later calls too), the wrap-up carried by the denials."""
    run = runs["smolagents_code", "repeat"]
    assert run["invoked"] == [A1] * 4 and len(_lookups(run)) == 4
    [deny] = _adapter_decisions(run, "deny")
    assert deny["loopguard.finding.kind"] == "repeat"
    assert len(_wrap_ups(run)) == 1 and run["final"] == f"wrap-up: {WRAP_UP}" and _ends(run) == ["loop_guard"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_healthy_run_is_untouched(runs: dict[Any, Any], adapter: str) -> None:
    run = runs[adapter, "healthy"]
    assert [t for t, _ in run["invoked"]] == ["lookup_order", "get_shipping", "lookup_order"]
    assert run["final"] == "done" and _wrap_ups(run) == [] and _ends(run) == []
    assert not [e for s in run["spans"] for n, e in s["events"] if n == "loopguard.decision"]
    assert len(_tools(run)) == 3 + (adapter == "smolagents")  # smolagents answers through its final_answer tool


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_calls_that_failed_are_recorded_as_failures(runs: dict[Any, Any], adapter: str) -> None:
    """Four failing calls in a row stop the run (an error streak): the guard saw them fail
    (CrewAI's "Error executing tool: ..." result, an exception smolagents and LlamaIndex report)."""
    run = runs[adapter, "errors"]
    assert run["invoked"] == [["flaky_tool", {"x": i, "mode": "fast"}] for i in range(1, 5)]
    assert len(_wrap_ups(run)) == 1 and run["final"] == f"wrap-up: {WRAP_UP}" and _ends(run) == ["loop_guard"]
    # CrewAI's LLM hook sees the stop before the model's next request; the wrappers, at its next call
    assert [e["loopguard.finding.kind"] for e in _adapter_decisions(run, "deny")] == (
        [] if adapter == "crewai" else ["error_streak"])


@pytest.mark.parametrize("adapter", [*ADAPTERS, "smolagents_code"])
def test_identical_calls_of_one_model_response_are_siblings_not_a_repeat(runs: dict[Any, Any], adapter: str) -> None:
    """Five identical calls asked at once share a turn (CrewAI: its LLM hook counts the
    requests; smolagents: `guard_agent` reads the agent's step, which a CodeAgent's code block,
    calling one after the other, shows; LlamaIndex: the adapter counts LLMChatStartEvents):
    none is denied."""
    run = runs[adapter, "parallel"]
    assert run["invoked"] == [A1] * 5
    assert _adapter_decisions(run, "deny") == [] and _wrap_ups(run) == [] and _ends(run) == []
    if adapter == "crewai":  # CrewAI's own repeated-call stop does not know siblings
        assert run["final"].startswith("error: ToolExecutionFailedError")
    else:
        assert run["final"] == "done"


@pytest.mark.parametrize("cell", [*ADAPTERS, *CELLS])
def test_four_identical_calls_are_not_denied(runs: dict[Any, Any], cell: str) -> None:
    """The mutation check: the repeat scenario with its fifth call removed denies nothing."""
    run = runs[cell, "four"]
    assert run["invoked"] == [A1] * 4 and run["final"] == "done"
    assert _adapter_decisions(run, "deny") == [] and _wrap_ups(run) == [] and _ends(run) == []
    assert not [r for r in _returns(run) if r.startswith(DENIED)]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("scenario", ("observe_tool", "kill_switch"))
def test_an_observe_only_tool_and_the_kill_switch_block_nothing(runs: dict[Any, Any], adapter: str,
                                                                 scenario: str) -> None:
    run = runs[adapter, scenario]
    assert _adapter_decisions(run, "deny") == [] and _wrap_ups(run) == [] and _ends(run) == []
    assert not [r for r in _returns(run) if "loop guard" in r]
    assert _processor_decisions(run, "would_block")[0] == (5, "repeat")  # what enforce mode would have done
    would_block = _adapter_decisions(run, "would_block")
    assert would_block and {e["loopguard.dispatched"] for e in would_block} == {True}
    if adapter == "crewai":
        # CrewAI 1.15 stops a run itself at the fifth identical call with the same result, after
        # it ran, by raising ToolExecutionFailedError (agent_utils.check_repeated_tool_call).
        assert run["invoked"] == [A1] * 5 and run["final"].startswith("error: ToolExecutionFailedError")
    else:
        assert run["invoked"] == [A1] * 8 and run["final"] == "done"


REFUSED = """
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context
import otel_loopguard
from otel_loopguard.enforce.llamaindex import LoopguardTool

async def remember(ctx: Context, note: str) -> str:
    \"\"\"Keep a note in the workflow's state.\"\"\"
    return note

async def lookup(order_id: str) -> str:
    \"\"\"Look up an order.\"\"\"
    return order_id

guard = otel_loopguard.guard(key="frameworks-li-key-8Rv3nHs6")
LoopguardTool(FunctionTool.from_defaults(async_fn=lookup), guard)  # a plain tool is wrapped
try:
    LoopguardTool(FunctionTool.from_defaults(async_fn=remember), guard)
except TypeError as exc:
    print(exc)
"""


def test_a_llamaindex_tool_taking_the_workflow_context_is_refused() -> None:
    """The workflow hands its Context to FunctionTools only: wrapped, such a tool would get none."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHON"))}
    proc = subprocess.run([str(PYTHON), "-c", REFUSED], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.startswith("LoopguardTool: remember takes the workflow Context")
