"""A smolagents managed agent's run is a call of that agent, in-process (processor/delegations.py).

smolagents + OpenInference write no tool span for a delegation: the managed agent runs as its own
AGENT span `<agent>.run`, under a `Step N` chain of the manager's AGENT span, which lists it in
`smolagents.managed_agents.<n>.name` from its start. Emitted here as the instrumentation emits
them (kinds and the manager's list at start, payloads at end), on a real TracerProvider.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.processor.delegations import MAX_LINKS_PER_TRACE, ManagedAgents

from .helpers import Stack, decisions, tags


def _span(tracer: Any, name: str, kind: str, at_start: Optional[dict[str, Any]] = None) -> Any:
    return tracer.start_as_current_span(name, attributes={"openinference.span.kind": kind, **(at_start or {})})


def _tool(tracer: Any, order_id: str) -> None:
    with _span(tracer, "SimpleTool", "TOOL", {"tool.name": "lookup_order"}) as span:
        span.set_attributes({"input.value": json.dumps({"args": [], "kwargs": {"order_id": order_id}}),
                             "output.value": f"order {order_id}: pending"})


def _specialist(tracer: Any, task: str) -> None:
    with _span(tracer, "specialist.run", "AGENT", {"smolagents.max_steps": 5}) as agent:
        with _span(tracer, "Step 1", "CHAIN"):
            _tool(tracer, "A-1")
        agent.set_attributes({"input.value": json.dumps({"task": task}), "output.value": "A-1 is pending"})


def _manager(stack: Stack, delegations: int, *, manages: tuple[str, ...] = ("specialist",),
             through_tool: bool = False) -> None:
    """A manager that delegates `delegations` times, each in a step of its own; through_tool: the
    managed agent runs inside a tool span (a call counted already), not directly."""
    tracer = stack.tracer
    listed = {f"smolagents.managed_agents.{i}.name": name for i, name in enumerate(manages)}
    with _span(tracer, "order_agent.run", "AGENT", listed):
        for i in range(delegations):
            with _span(tracer, f"Step {i + 1}", "CHAIN"):
                with _span(tracer, "ScriptedModel.generate", "LLM"):
                    pass
                if through_tool:
                    with _span(tracer, "AgentTool", "TOOL", {"tool.name": "ask_specialist"}) as tool:
                        _specialist(tracer, "Where is order A-1?")
                        tool.set_attributes({"input.value": json.dumps({"q": "A-1"}), "output.value": "A-1 is pending"})
                else:
                    _specialist(tracer, "Where is order A-1?")


def _calls(stack: Stack) -> list[tuple[str, int]]:
    return [(tags(s)["loopguard.tool.name"], tags(s)["loopguard.seq"]) for s in stack.tagged()]


def test_a_managed_agents_run_is_a_call_numbered_in_dispatch_order(stack: Stack) -> None:
    _manager(stack, 2)
    assert _calls(stack) == [("specialist", 1), ("lookup_order", 2), ("specialist", 3), ("lookup_order", 4)]
    delegation = stack.tagged()[0]
    assert delegation.name == "specialist.run" and tags(delegation)["loopguard.outcome"] == "ok"
    assert "loopguard.args.digest" in tags(delegation) and "loopguard.result.digest" in tags(delegation)


def test_a_delegation_loop_is_found(stack: Stack) -> None:
    _manager(stack, 6)
    kinds = {d["loopguard.finding.kind"] for s in stack.tagged() if s.name == "specialist.run" for d in decisions(s)}
    assert kinds, "six identical delegations with one answer: a loop on the delegation itself"


def test_negative_control_an_agent_its_manager_does_not_list_is_no_call(stack: Stack) -> None:
    """An agent span under an agent span is no delegation by itself (OpenAI Agents handoffs,
    OpenLLMetry's `<agent>.workflow` wrappers nest so too): only the manager's list makes it one."""
    _manager(stack, 2, manages=("billing",))
    assert _calls(stack) == [("lookup_order", 1), ("lookup_order", 2)]


def test_negative_control_an_agent_run_inside_a_tool_call_is_that_call(stack: Stack) -> None:
    """A tool span between the manager and the agent: the call is counted already (the tool)."""
    _manager(stack, 2, through_tool=True)
    assert [name for name, _ in _calls(stack)] == ["ask_specialist", "lookup_order", "ask_specialist", "lookup_order"]


def test_mutation_without_the_managers_list_the_delegations_disappear(stack: Stack) -> None:
    _manager(stack, 2, manages=())
    assert _calls(stack) == [("lookup_order", 1), ("lookup_order", 2)]


def test_no_manager_no_tree_kept() -> None:
    """Traces without a manager keep nothing (the usual OpenInference app pays one kind test)."""
    tracer = TracerProvider().get_tracer("t")
    managed = ManagedAgents(max_traces=8)
    for kind in ("AGENT", "CHAIN", "TOOL"):
        span = tracer.start_span("x.run", attributes={"openinference.span.kind": kind})
        assert managed.started(span, span.attributes) is False
    assert managed.active is False


def test_memory_is_bounded() -> None:
    tracer = TracerProvider().get_tracer("t")
    managed = ManagedAgents(max_traces=16)
    listed = {"openinference.span.kind": "AGENT", "smolagents.managed_agents.0.name": "specialist"}
    for _ in range(100):  # a manager per trace, never ended
        span = tracer.start_span("order_agent.run", attributes=listed)
        managed.started(span, span.attributes)
    assert len(managed._trees) <= 16
    with tracer.start_as_current_span("order_agent.run", attributes=listed) as root:
        managed.started(root, root.attributes)
        for _ in range(2 * MAX_LINKS_PER_TRACE):
            span = tracer.start_span("Step", attributes={"openinference.span.kind": "CHAIN"})
            managed.started(span, span.attributes)
    assert all(len(tree.links) <= MAX_LINKS_PER_TRACE for tree in managed._trees.values())


def test_a_trees_memory_goes_when_its_last_manager_ends(stack: Stack) -> None:
    _manager(stack, 3)
    assert len(stack.tagged()) == 6
    managed = stack.handle.processor._tagger.managed  # type: ignore[union-attr]
    assert managed._trees == {} and managed._calls == {}
