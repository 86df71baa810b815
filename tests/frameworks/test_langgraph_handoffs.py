"""The guard on LangGraph handoffs (issue 20): `LoopGuardMiddleware` judges a handoff tool's
`Command(goto=<agent>, graph=Command.PARENT)` as the action `handoff(<from> -> <to>)`, and in
enforce mode denies the one that completes a ping-pong before the graph dispatches it.

Real LangGraph graphs (tests/frameworks/lg_handoffs.py: a swarm of two agents, a supervisor
with three workers) driven by a scripted model, traced by OpenInference or OpenLLMetry with
the processor installed. Each handoff tool either declares its destination (langgraph-swarm /
langgraph-supervisor's metadata: asked before the tool runs) or not (asked when the tool has
returned its Command, before the graph routes it).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph")

from otel_loopguard.enforce import make_guard  # noqa: E402
from otel_loopguard.enforce.langchain import LoopGuardMiddleware  # noqa: E402

from .lc_helpers import KEY, Stack, _clean_lc_env, decision_events, lc, lc_instrumented  # noqa: E402,F401
from .lg_handoffs import RoutingModel, run, supervisor, swarm  # noqa: E402

PING_PONG = ["billing", "triage"] * 4  # 8 handoffs, then billing answers
BILLING_TO_TRIAGE = "handoff(billing -> triage)"


def _guard(enforce: bool) -> Any:
    return make_guard(key=KEY, enforce=enforce)


def _handoff_decisions(stack: Stack, verdict: str) -> list[Any]:
    return [e for _, e in decision_events(stack.spans(), verdict)
            if str(e.attributes.get("loopguard.tool.name", "")).startswith("handoff(")]


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "command-only"])
def test_enforce_mode_denies_the_handoff_that_completes_the_ping_pong(lc: Stack, declared: bool) -> None:
    """The 6th handoff would complete three repetitions of (triage -> billing, billing ->
    triage): denied, so the run stays with billing, which is then wrapped up."""
    model = RoutingModel(route=list(PING_PONG), asked=[])
    result = run(swarm(model, [LoopGuardMiddleware(_guard(True))], declared))
    assert model.asked == ["triage", "billing"] * 3 + ["billing"]
    assert result["messages"][-1].content == "wrapped up"
    denied = _handoff_decisions(lc, "deny")
    assert denied and denied[0].attributes["loopguard.tool.name"] == BILLING_TO_TRIAGE
    assert denied[0].attributes["loopguard.finding.kind"] == "cycle"
    assert denied[0].attributes["loopguard.dispatched"] is False
    # A declared destination is judged before the tool runs: the denied handoff has no tool
    # span. Otherwise the tool ran (it built the Command) and only the Command was withheld.
    ran = lc.tool_spans(lc.spans())
    assert len(ran) == (5 if declared else 6)


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "command-only"])
def test_observe_mode_lets_every_handoff_happen_and_records_would_block(lc: Stack, declared: bool) -> None:
    model = RoutingModel(route=list(PING_PONG), asked=[])
    result = run(swarm(model, [LoopGuardMiddleware(_guard(False))], declared))
    assert model.asked == ["triage", "billing"] * 4 + ["triage"]
    assert result["messages"][-1].content == "done"
    would = _handoff_decisions(lc, "would_block")
    assert would and would[0].attributes["loopguard.tool.name"] == BILLING_TO_TRIAGE
    assert not _handoff_decisions(lc, "deny")


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "command-only"])
def test_a_supervisor_routing_to_several_workers_is_never_denied(lc: Stack, declared: bool) -> None:
    """Negative control: supervisor -> billing, -> shipping, -> refund (each worker answering
    and going back by an edge) are three different handoffs: all happen, none is denied or
    warned about, and the supervisor answers."""
    model = RoutingModel(route=["billing", "shipping", "refund"], asked=[])
    result = run(supervisor(model, [LoopGuardMiddleware(_guard(True))], declared))
    assert model.asked == ["supervisor", "worker"] * 3 + ["supervisor"]
    assert result["messages"][-1].content == "done"
    assert not [e for _, e in decision_events(lc.spans())]


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "command-only"])
def test_mutation_a_supervisor_bouncing_between_two_workers_is_denied_at_the_sixth_handoff(
        lc: Stack, declared: bool) -> None:
    """The control's twin: the same supervisor sends the run to billing, shipping, billing,
    ... The 6th handoff completes three repetitions and is denied; the supervisor wraps up."""
    model = RoutingModel(route=["billing", "shipping"] * 4, asked=[])
    result = run(supervisor(model, [LoopGuardMiddleware(_guard(True))], declared))
    assert model.asked == ["supervisor", "worker"] * 5 + ["supervisor", "supervisor"]
    assert result["messages"][-1].content == "wrapped up"
    denied = _handoff_decisions(lc, "deny")
    assert denied and denied[0].attributes["loopguard.tool.name"] == "handoff(supervisor -> shipping)"


def test_a_single_handoff_is_never_denied(lc: Stack) -> None:
    model = RoutingModel(route=["billing"], asked=[])
    result = run(swarm(model, [LoopGuardMiddleware(_guard(True))], declared=True))
    assert model.asked == ["triage", "billing"]
    assert result["messages"][-1].content == "done"
    assert not [e for _, e in decision_events(lc.spans())]
