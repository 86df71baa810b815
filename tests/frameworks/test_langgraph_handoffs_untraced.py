"""The guard on LangGraph handoffs without any tracing (issue 20): no span gives a trace id
to key the run by, and each agent's invocation of a multi-agent graph is an invocation of
its own. A module of its own: the instrumented tests patch LangChain for their whole module.
"""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph")

from opentelemetry import trace  # noqa: E402

from otel_loopguard.enforce import make_guard  # noqa: E402
from otel_loopguard.enforce.langchain import LoopGuardMiddleware  # noqa: E402

from .lc_helpers import KEY  # noqa: E402
from .lg_handoffs import RoutingModel, run, supervisor, swarm  # noqa: E402

PING_PONG = ["billing", "triage"] * 4


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "command-only"])
def test_without_tracing_the_ping_pong_is_one_run_across_the_agents(declared: bool) -> None:
    """No span to take a trace id from: each agent's invocation would be a run of its own
    (which hides a ping-pong between them), so handoffs are judged in the run of the user's
    request they serve, and the 6th is denied all the same."""
    assert not trace.get_current_span().get_span_context().is_valid
    model = RoutingModel(route=list(PING_PONG), asked=[])
    result = run(swarm(model, [LoopGuardMiddleware(make_guard(key=KEY))], declared))
    assert model.asked == ["triage", "billing"] * 3 + ["billing"]
    assert result["messages"][-1].content == "wrapped up"


def test_without_tracing_a_supervisor_routing_to_several_workers_passes() -> None:
    """Negative control: the run of the user's request holds the supervisor's three different
    handoffs; none is denied."""
    model = RoutingModel(route=["billing", "shipping", "refund"], asked=[])
    result = run(supervisor(model, [LoopGuardMiddleware(make_guard(key=KEY))], declared=True))
    assert model.asked == ["supervisor", "worker"] * 3 + ["supervisor"]
    assert result["messages"][-1].content == "done"
