"""The processor tags handoff spans like tool spans (issue 20), in real Agents SDK runs.

Two agents hand a run back and forth (a scripted model calls the SDK's `transfer_to_<agent>`
tools, no network) under otel_loopguard.install() and an OTel bridge. Where the span names
the target when it ends (OpenInference), the processor numbers each handoff, digests the
action (handoff, from, to) and judges the run; OpenLLMetry's handoff span never names its
target, so the processor leaves it to the receiver and the audit (which take it from the
next handoff) and must not count it as a call.
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
