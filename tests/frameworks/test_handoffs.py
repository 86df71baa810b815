"""The processor tags handoff spans like tool spans (issue 20), in real Agents SDK runs.

Two agents hand a run back and forth (a scripted model calls the SDK's `transfer_to_<agent>`
tools, no network) under otel_loopguard.install() and an OTel bridge. Where the span names
the target when it ends (OpenInference), the processor numbers each handoff, digests the
action (handoff, from, to) and judges the run; OpenLLMetry's handoff span never names its
target, so the processor leaves it to the receiver and the audit (which take it from the
agent span that follows) and must not count it as a call.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

pytest.importorskip("agents")  # the `agents` extra

from agents import Agent, RunConfig, Runner  # noqa: E402

from .agents_helpers import AgentsStack, ScriptedModel, _clean_agents_env, stacks  # noqa: E402,F401

TRIAGE_TO_BILLING = "handoff(TriageAgent -> BillingAgent)"
BILLING_TO_TRIAGE = "handoff(BillingAgent -> TriageAgent)"


def _ping_pong(handoffs: int) -> None:
    """TriageAgent and BillingAgent hand the run to each other `handoffs` times, then answer."""
    targets = ["transfer_to_billingagent", "transfer_to_triageagent"]
    model = ScriptedModel([[(targets[i % 2], {})] for i in range(handoffs)] + ["done"])
    triage = Agent(name="TriageAgent", instructions="Route.", model=model)
    billing = Agent(name="BillingAgent", instructions="Bill.", model=model)
    triage.handoffs, billing.handoffs = [billing], [triage]
    result = asyncio.run(Runner.run(triage, "My invoice is wrong.", max_turns=30,
                                    run_config=RunConfig(workflow_name="loopguard-handoffs")))
    assert result.final_output == "done"


def _tagged(stack: AgentsStack) -> list[Any]:
    return [s for s in stack.spans() if str((s.attributes or {}).get("loopguard.tool.name", "")).startswith("handoff(")]


def _decisions(span: Any) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == "loopguard.decision"]


def test_openinference_handoffs_are_numbered_digested_and_judged(stacks: Callable[..., AgentsStack]) -> None:
    stack = stacks("openinference")
    _ping_pong(8)
    spans = _tagged(stack)
    attrs = [s.attributes or {} for s in spans]
    assert [a["loopguard.seq"] for a in attrs] == list(range(1, 9))
    assert [a["loopguard.tool.name"] for a in attrs] == [TRIAGE_TO_BILLING, BILLING_TO_TRIAGE] * 4
    digests = [a["loopguard.args.digest"] for a in attrs]
    assert len(set(digests)) == 2 and digests[0] == digests[2] != digests[1]
    # Judged in-process: the 6th handoff completes the third repetition of the pattern.
    stops = [(a["loopguard.seq"], d) for s, a in zip(spans, attrs) for d in _decisions(s)
             if d.get("loopguard.finding.severity") == "stop"]
    assert stops and stops[0][0] == 6 and stops[0][1]["loopguard.finding.kind"] == "cycle"


def test_with_agent_scopes_a_ping_pong_is_still_one_run(stacks: Callable[..., AgentsStack]) -> None:
    """Each agent invocation is a scope of its own; a handoff belongs to the run around them,
    so the ping-pong between invocations is still found (at the 6th handoff)."""
    stack = stacks("openinference", agent_scopes=True)
    _ping_pong(8)
    spans = _tagged(stack)
    assert len({(s.attributes or {})["loopguard.run.id"] for s in spans}) == 1
    assert [(s.attributes or {})["loopguard.seq"] for s in spans] == list(range(1, 9))
    stops = [(s.attributes or {})["loopguard.seq"] for s in spans for d in _decisions(s)
             if d.get("loopguard.finding.severity") == "stop"]
    assert stops and stops[0] == 6


def test_openinference_a_single_handoff_is_tagged_and_raises_nothing(stacks: Callable[..., AgentsStack]) -> None:
    stack = stacks("openinference")
    _ping_pong(1)
    spans = _tagged(stack)
    assert [(s.attributes or {})["loopguard.seq"] for s in spans] == [1]
    assert not [d for s in stack.spans() for d in _decisions(s)]


def test_openllmetry_handoffs_are_left_untagged_and_uncounted(stacks: Callable[..., AgentsStack]) -> None:
    """The target is unknown when the span ends: the processor neither numbers nor digests it."""
    stack = stacks("openllmetry")
    _ping_pong(8)
    handoffs = [s for s in stack.spans() if (s.attributes or {}).get("traceloop.span.kind") == "handoff"]
    assert len(handoffs) == 8
    assert not [s for s in handoffs if "loopguard.seq" in (s.attributes or {})]
    assert not _tagged(stack)


def _delegate(times: int) -> None:
    """An orchestrator calls a sub-agent (`as_tool`) with the same input `times` times; the
    sub-agent looks the invoice up once per call and answers."""
    from agents import function_tool

    @function_tool
    def lookup_invoice(invoice_id: str) -> str:
        """Look an invoice up."""
        return f"invoice {invoice_id}: paid"

    one = [[("billing_expert", {"input": "why is invoice 7 wrong?"})], [("lookup_invoice", {"invoice_id": "7"})],
           "invoice 7 is paid"]
    model = ScriptedModel(one * times + ["done"])
    billing = Agent(name="BillingAgent", instructions="Bill.", model=model, tools=[lookup_invoice])
    orchestrator = Agent(name="Orchestrator", instructions="Delegate.", model=model,
                         tools=[billing.as_tool(tool_name="billing_expert", tool_description="Billing questions.")])
    result = asyncio.run(Runner.run(orchestrator, "Invoice 7 is wrong.", max_turns=30,
                                    run_config=RunConfig(workflow_name="loopguard-subagents")))
    assert result.final_output == "done"


def _stops(stack: AgentsStack) -> list[tuple[str, str, str, int]]:
    """(run id, tool, kind, seq) of every stop the processor recorded, in span start order."""
    out = []
    for s in stack.spans():
        a = s.attributes or {}
        for d in _decisions(s):
            if d.get("loopguard.finding.severity") == "stop":
                out.append((str(a.get("loopguard.run.id")), str(a.get("loopguard.tool.name")),
                            str(d.get("loopguard.finding.kind")), int(a.get("loopguard.seq", 0))))
    return out


@pytest.mark.parametrize("agent_scopes", [False, True])
def test_a_sub_agent_delegated_the_same_question_is_judged_at_the_orchestrators_level(
        stacks: Callable[..., AgentsStack], agent_scopes: bool) -> None:
    """agent_scopes off: one run per trace, the orchestrator's delegations and the sub-agent's
    lookups interleaved in it; on: the orchestrator's run holds its delegations alone, each
    sub-agent invocation is a run of its own. Either way the repeated delegation stops."""
    stack = stacks("openinference", agent_scopes=agent_scopes)
    _delegate(6)
    runs = {str((s.attributes or {}).get("loopguard.run.id")) for s in stack.spans()
            if "loopguard.seq" in (s.attributes or {})}
    stops = _stops(stack)
    assert stops
    if agent_scopes:
        assert len(runs) == 7  # the orchestrator's, and one per sub-agent invocation
        assert {stop[1] for stop in stops} == {"billing_expert"}
        assert stops[0][1:3] == ("billing_expert", "repeat") and stops[0][3] == 5  # the 5th delegation
    else:
        assert len(runs) == 1
        assert stops[0][1:3] == ("billing_expert", "cycle") and stops[0][3] == 5  # the 3rd delegation


@pytest.mark.parametrize("agent_scopes", [False, True])
def test_a_single_delegation_raises_nothing_at_either_level(stacks: Callable[..., AgentsStack],
                                                               agent_scopes: bool) -> None:
    """Negative control: the orchestrator delegates once; nothing stops at either level."""
    stack = stacks("openinference", agent_scopes=agent_scopes)
    _delegate(1)
    assert _stops(stack) == []


class _Bouncing:
    """A model that hands the run on through the first handoff it is offered, `asks` times,
    then answers; records which agent was current at each request."""

    def __init__(self, asks: int):
        self.asks = asks
        self.agents: list[str] = []

    def model(self) -> Any:
        from agents.items import ModelResponse
        from agents.models.interface import Model
        from agents.usage import Usage
        from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

        outer = self

        class Bouncing(Model):
            async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                                   output_schema: Any, handoffs: Any, tracing: Any, **_: Any) -> ModelResponse:
                outer.agents.append(str(system_instructions))
                i = len(outer.agents)
                usage = Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
                if i > outer.asks:
                    text = ResponseOutputText(type="output_text", text="done", annotations=[])
                    return ModelResponse(output=[ResponseOutputMessage(id="m", type="message", role="assistant",
                                                                       status="completed", content=[text])],
                                         usage=usage, response_id=f"r{i}")
                call = ResponseFunctionToolCall(type="function_call", id=f"fc{i}", call_id=f"c{i}",
                                                name=handoffs[0].tool_name, arguments="{}", status="completed")
                return ModelResponse(output=[call], usage=usage, response_id=f"r{i}")

            def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
                raise NotImplementedError

        return Bouncing()


def _guarded_ping_pong(enforce: bool, asks: int = 8) -> list[str]:
    """The agents whose turn each model request was, with both agents' handoffs guarded."""
    from otel_loopguard.enforce import make_guard
    from otel_loopguard.enforce.openai_agents import guard_handoffs

    from .agents_helpers import KEY

    bouncing = _Bouncing(asks)
    model = bouncing.model()
    triage = Agent(name="TriageAgent", instructions="TriageAgent", model=model)
    billing = Agent(name="BillingAgent", instructions="BillingAgent", model=model)
    triage.handoffs, billing.handoffs = [billing], [triage]
    guard = make_guard(key=KEY, enforce=enforce)
    guard_handoffs(guard, triage)
    guard_handoffs(guard, billing)
    result = asyncio.run(Runner.run(triage, "My invoice is wrong.", max_turns=30,
                                    run_config=RunConfig(workflow_name="loopguard-handoffs")))
    assert result.final_output == "done"
    return bouncing.agents


def test_enforce_mode_denies_the_handoff_that_completes_the_ping_pong(stacks: Callable[..., AgentsStack]) -> None:
    """The 6th handoff would complete three repetitions: denied, the run stays with BillingAgent,
    whose later handoffs are denied too (the run is stopped)."""
    stacks("openinference")
    agents = _guarded_ping_pong(enforce=True)
    # Requests 1-6 alternate (5 handoffs happened); from the 6th handoff on, BillingAgent keeps the run.
    assert agents[:6] == ["TriageAgent", "BillingAgent"] * 3
    assert set(agents[6:]) == {"BillingAgent"}


def test_observe_mode_lets_every_handoff_happen(stacks: Callable[..., AgentsStack]) -> None:
    stack = stacks("openinference")
    agents = _guarded_ping_pong(enforce=False)
    assert agents == ["TriageAgent", "BillingAgent"] * 4 + ["TriageAgent"]
    # The guard's own decisions (they carry loopguard.dispatched; the processor's do not).
    would = [d for s in stack.spans() for d in _decisions(s)
             if d.get("loopguard.decision") == "would_block" and "loopguard.dispatched" in d]
    assert would and would[0]["loopguard.tool.name"] == "handoff(BillingAgent -> TriageAgent)"


def test_enforce_mode_lets_a_single_handoff_happen(stacks: Callable[..., AgentsStack]) -> None:
    """Negative control: one handoff is no loop."""
    stacks("openinference")
    assert _guarded_ping_pong(enforce=True, asks=1) == ["TriageAgent", "BillingAgent"]
