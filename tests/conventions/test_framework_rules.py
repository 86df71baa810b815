"""The issue-30 recognition rules, each with a negative control and a mutation check on the
real capture it was learned from (research/conventions/fw_captures/, FINDINGS.md section 8):

- a default object repr (`<pkg.Class object at 0x...>`) in arguments is a handle, not content
  (LlamaIndex + OpenInference records the workflow's `Context` among a tool's keywords);
- a tool whose `gen_ai.tool.type` is a transfer (Google ADK's `transfer_to_agent`) is a handoff
  from the agent that calls it (`gen_ai.agent.name`) to the agent its arguments name;
- a model span that is its calls' parent spans them all (Google ADK + OpenInference): its end is
  no turn boundary, its record of the conversation gives the calls' turns;
- an agent span under a manager's agent span that lists it (smolagents) is a delegation: a call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.audit import audit
from otel_loopguard.calls import RawCall
from otel_loopguard.conventions import ToolSpan, recognise
from otel_loopguard.conventions.conversation import requested_calls
from otel_loopguard.conventions.delegations import declared_agents, delegated_agent, manager_of
from otel_loopguard.conventions.handoffs import target_unknown
from otel_loopguard.conventions.payloads import unwrap_arguments
from otel_loopguard.otlp.json_format import request_to_json
from otel_loopguard.otlp.delegations import DelegationTree
from otel_loopguard.otlp.order import enclosed_turns

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from frameworks.fw_labels import CAPTURES, name_of, request_of  # noqa: E402

KEY = "conventions-rules-key-4Tn8Vw2Qs"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)


def _findings(doc: dict[str, Any], tmp_path: Path) -> list[str]:
    cut = tmp_path / "capture.json"
    cut.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "capture.otlp.json"
    out.write_text(json.dumps(request_to_json(request_of(cut))) + "\n", encoding="utf-8")
    return [name_of(f.kind, f.severity, f.tool) for r in audit([out]) for f in r.findings]


def _capture(name: str) -> dict[str, Any]:
    return json.loads((CAPTURES / f"{name}.json").read_text(encoding="utf-8"))


# -- a default object repr is a handle, not content ------------------------------------------

LI_ARGS = '{"kwargs": {"to_agent": "%s", "reason": "route", "ctx": "<workflows.context.context.Context object at %s>"}}'


def _li_tool(to_agent: str, address: str) -> ToolSpan:
    found = recognise({"openinference.span.kind": "TOOL", "tool.name": "handoff",
                       "input.value": LI_ARGS % (to_agent, address), "output.value": "ok"})
    assert isinstance(found, ToolSpan)
    return found


def test_two_calls_that_differ_only_in_an_object_address_are_one_action() -> None:
    assert _li_tool("billing", "0x7f61fcc80d90").arguments == _li_tool("billing", "0x7f61ffe31d90").arguments
    assert "0x7f61" not in _li_tool("billing", "0x7f61fcc80d90").arguments


def test_negative_control_other_arguments_and_hex_values_stay_content() -> None:
    """A different target stays a different action; a hex value that is no object repr (an
    address the tool is asked about, a colour) and text that only mentions one are kept."""
    assert _li_tool("billing", "0x7f61fcc80d90").arguments != _li_tool("triage", "0x7f61fcc80d90").arguments
    for text in ('{"address": "0x7f61fcc80d90"}', '{"q": "what is at 0x7f61fcc80d90"}',
                 '{"q": "<my object at home>"}', '{"colour": "#7f61fc"}'):
        assert unwrap_arguments(text) == text


def test_the_llamaindex_handoff_ping_pong_is_a_cycle_and_cut_short_it_is_not(tmp_path: Path) -> None:
    """Mutation: without its last two handoffs (4 of 6) the ping-pong is no cycle stop."""
    doc = _capture("li_openinference__handoff-pingpong")
    assert "cycle/stop" in _findings(doc, tmp_path)
    tools = [s for s in doc["spans"] if s["attributes"].get("openinference.span.kind") == "TOOL"]
    doc["spans"] = [s for s in doc["spans"] if all(s is not t for t in tools[-2:])]
    assert "cycle/stop" not in _findings(doc, tmp_path)


def test_mutation_with_the_addresses_kept_the_ping_pong_is_missed(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule is what finds it: with the mask undone, every handoff is a new action."""
    monkeypatch.setattr("otel_loopguard.conventions.payloads.ADDRESS_MARK", "\x00never")
    assert "cycle/stop" not in _findings(_capture("li_openinference__handoff-pingpong"), tmp_path)


# -- a transfer tool is a handoff ------------------------------------------------------------

def _adk_tool(tool_type: Any, agent: str = "triage", **extra: Any) -> Any:
    return recognise({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer_to_agent",
                      "gen_ai.tool.type": tool_type, "gen_ai.agent.name": agent, "gen_ai.tool.call.id": "h1", **extra})


def test_a_transfer_without_arguments_is_a_handoff_from_its_agent_to_an_unknown_one() -> None:
    found = _adk_tool("TransferToAgentTool")
    assert isinstance(found, ToolSpan)
    assert (found.tool, found.result) == ("handoff(triage -> ?)", None)
    assert found.arguments == {"from_agent": "triage", "to_agent": "?"}
    # the processor tags it when it ends (a target left None would wait for the agent that follows)
    assert not target_unknown(found)
    assert _adk_tool("TransferToAgentTool", agent="billing").arguments != found.arguments


def test_a_transfer_with_its_arguments_names_its_target() -> None:
    for key in ("gen_ai.tool.call.arguments", "input.value"):  # ADK with content on; OpenInference
        found = _adk_tool("TransferToAgentTool", **{key: '{"agent_name": "billing"}'})
        assert (found.tool, found.result) == ("handoff(triage -> billing)", {"to_agent": "billing"})


def test_negative_control_other_tool_types_stay_tool_calls() -> None:
    """A function tool, a sub-agent called as a tool (AgentTool: a delegation, not a handoff)
    and a malformed type (an array value) are tool calls under their own name."""
    for tool_type in ("FunctionTool", "AgentTool", ["TransferToAgentTool"]):
        found = _adk_tool(tool_type)
        assert isinstance(found, ToolSpan) and found.tool == "transfer_to_agent"


def test_the_adk_transfer_ping_pong_is_a_cycle_and_cut_short_it_is_not(tmp_path: Path) -> None:
    """Content off, six transfers triage <-> billing: a handoff cycle (it was one repeated
    `transfer_to_agent`). Mutation: four transfers are no cycle stop."""
    doc = _capture("adk_builtin__handoff-pingpong")
    names = _findings(doc, tmp_path)
    assert "cycle/stop" in names and not any(n.startswith("repeat/") for n in names)
    tools = [s for s in doc["spans"] if s["attributes"].get("gen_ai.tool.type") == "TransferToAgentTool"]
    doc["spans"] = [s for s in doc["spans"] if all(s is not t for t in tools[-2:])]
    assert "cycle/stop" not in _findings(doc, tmp_path)


def test_mutation_without_the_tool_type_the_transfers_are_one_repeated_call(tmp_path: Path) -> None:
    doc = _capture("adk_builtin__handoff-pingpong")
    for s in doc["spans"]:
        s["attributes"].pop("gen_ai.tool.type", None)
    names = _findings(doc, tmp_path)
    assert "repeat/stop transfer_to_agent" in names and "cycle/stop" not in names


# -- a model span that is its calls' parent spans them: its record gives their turns ---------



def _call(seq: int, call_id: str, parent: str, turn: Any = None) -> RawCall:
    return RawCall(seq=seq, tool="lookup_order", arguments={"order_id": "A-1"}, result="ok", ok=True, finished=True,
                   turn=turn, call_id=call_id, parent_id=parent, start_ns=seq * 10, end_ns=seq * 10 + 5)


def test_the_conversation_record_says_which_message_asked_for_each_call() -> None:
    attrs = {"llm.input_messages.2.message.tool_calls.0.tool_call.id": "c1a",
             "llm.input_messages.2.message.tool_calls.1.tool_call.id": "c1b",
             "llm.input_messages.4.message.tool_calls.0.tool_call.id": "c2",
             "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c2",  # also the last request
             "llm.output_messages.0.message.tool_calls.1.tool_call.id": "c3",
             "llm.input_messages.1.message.content": "c9", "gen_ai.tool.call.id": "c8",
             "openinference.span.kind": "LLM"}
    assert requested_calls(attrs) == {"c1a": 2, "c1b": 2, "c2": 4, "c3": 5}
    assert requested_calls({**attrs, "openinference.span.kind": "CHAIN"}) == {}  # only an LLM span's record


def test_calls_a_model_span_encloses_take_their_turns_from_its_record() -> None:
    calls = [_call(1, "c1a", "llm"), _call(2, "c1b", "llm"), _call(3, "c2", "llm"), _call(4, "cx", "llm")]
    out, ends = enclosed_turns(calls, [("llm", 999, {"c1a": 2, "c1b": 2, "c2": 4})])
    assert ends == []  # its end bounds no turn
    assert [c.turn for c in out] == [3, 3, 5, 6]  # siblings share one; an unrecorded call has its own


def test_negative_control_a_model_span_beside_its_calls_still_bounds_turns() -> None:
    """ADK's own spans: the calls' parent is the agent span, the model span a sibling that ends
    after the calls it asked for started; its end stays a turn boundary. Tagged turns are kept."""
    calls = [_call(1, "c1", "agent"), _call(2, "c2", "llm", turn=7)]
    out, ends = enclosed_turns(calls, [("llm", 12, {"c1": 2}), ("llm2", 40, {})])
    assert out == calls and ends == [12, 40]


def _llm_parent(doc: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in doc["spans"] if s["attributes"].get("openinference.span.kind") == "LLM")


def test_the_adk_openinference_repeat_is_found_and_its_parallel_batches_stay_batches(tmp_path: Path) -> None:
    assert "repeat/stop lookup_order" in _findings(_capture("adk_openinference__repeat"), tmp_path)
    assert "error_streak/stop flaky_tool" in _findings(_capture("adk_openinference__errors"), tmp_path)
    names = _findings(_capture("adk_openinference__parallel"), tmp_path)
    assert "parallel_duplicate/info lookup_order" in names and not any("/warn" in n or "/stop" in n for n in names)


def test_mutation_without_the_record_the_batches_are_consecutive_calls(tmp_path: Path) -> None:
    doc = _capture("adk_openinference__parallel")
    llm = _llm_parent(doc)
    llm["attributes"] = {k: v for k, v in llm["attributes"].items() if not k.endswith(".tool_call.id")}
    assert "parallel_duplicate/info lookup_order" not in _findings(doc, tmp_path)


def test_mutation_calls_moved_beside_the_model_span_read_as_one_turn_again(tmp_path: Path) -> None:
    """The parent relation is what the rule reads: with the tool spans made the agent span's
    children, the one model span ends after them all and the five calls are siblings again."""
    doc = _capture("adk_openinference__repeat")
    llm = _llm_parent(doc)
    for s in doc["spans"]:
        if s.get("parent_span_id") == llm["span_id"]:
            s["parent_span_id"] = llm["parent_span_id"]
    names = _findings(doc, tmp_path)
    assert "repeat/stop lookup_order" not in names and "parallel_duplicate/info lookup_order" in names


# -- a managed agent's run under its manager is a delegation ---------------------------------

def test_an_agent_span_is_a_delegation_only_under_a_manager_that_lists_it() -> None:
    links = {"sub": ("step", "agent"), "step": ("root", "other"), "root": ("", "agent"),
             "inner": ("tool", "agent"), "tool": ("step", "tool")}
    assert manager_of("sub", links) == "root"
    assert manager_of("inner", links) is None  # a tool span first: the call is counted already
    assert manager_of("root", links) is None
    declared = declared_agents({"smolagents.managed_agents.0.name": "specialist",
                                "smolagents.managed_agents.0.description": "Answers.", "agent.name": "x"})
    assert declared == {"specialist"}
    assert delegated_agent("specialist.run", declared) == "specialist"
    assert delegated_agent("stranger.run", declared) is None and delegated_agent("specialist", declared) is None


def _counts(doc: dict[str, Any], tmp_path: Path) -> tuple[int, list[str]]:
    cut = tmp_path / "capture.json"
    cut.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "capture.otlp.json"
    out.write_text(json.dumps(request_to_json(request_of(cut))) + "\n", encoding="utf-8")
    reports = audit([out])
    return sum(len(r.calls) for r in reports), [c.tool for r in reports for c in r.calls]


def test_the_smolagents_delegations_are_calls(tmp_path: Path) -> None:
    calls, tools = _counts(_capture("smol_openinference__delegate-ok"), tmp_path)
    assert calls == 4 and tools.count("specialist") == 1
    calls, tools = _counts(_capture("smol_openinference__delegate"), tmp_path)
    assert calls == 13 and tools.count("specialist") == 4


NESTED = ["handoffs/oa_openinference__handoff_pingpong", "handoffs/lg_traceloop__handoff_supervisor",
          "lc_traceloop__sync__raise"]


@pytest.mark.parametrize("capture", NESTED)
def test_negative_control_nested_agent_spans_of_handoffs_and_wrappers_are_no_calls(capture: str,
                                                                                   tmp_path: Path) -> None:
    """OpenAI Agents handoffs and OpenLLMetry's LangGraph / LangChain wrappers nest agent spans
    under agent spans with no manager's list: no call is added."""
    path = ROOT / "research" / "conventions" / "captures" / f"{capture}.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    agent_ids = {s["span_id"] for s in doc["spans"] if s["attributes"].get("openinference.span.kind") == "AGENT"}
    cut = tmp_path / "capture.json"
    cut.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "capture.otlp.json"
    out.write_text(json.dumps(request_to_json(request_of(cut))) + "\n", encoding="utf-8")
    assert not [c for r in audit([out]) for c in r.calls if c.span_id in agent_ids]


def test_mutation_without_the_managers_list_the_delegations_are_not_counted(tmp_path: Path) -> None:
    doc = _capture("smol_openinference__delegate")
    for s in doc["spans"]:
        s["attributes"] = {k: v for k, v in s["attributes"].items() if not k.startswith("smolagents.managed_agents.")}
    assert _counts(doc, tmp_path)[0] == 9


def test_a_run_the_processor_numbered_gets_no_delegation() -> None:
    """Its numbering is dense (the receiver, which cannot see delegations, judges it so)."""
    assert DelegationTree().calls("run", numbered=True) == []
