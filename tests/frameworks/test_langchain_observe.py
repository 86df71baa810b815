"""Observe mode in a real LangChain v1 agent: install() only, no middleware.

The loop runs to the end; the exported tool spans carry the loop guard's tags and a
`would_block` decision event where enforce mode would have stopped the run.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents.middleware import ToolErrorMiddleware  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from .lc_helpers import (  # noqa: E402,F401 - fixtures are used by name
    KEY,
    Stack,
    _clean_lc_env,
    decision_events,
    lc,
    lc_instrumented,
    model,
    repeat,
    run_agent,
)
from processor.helpers import CONTRACT_TAGS  # noqa: E402 - the contract's names, written out once

# Where each instrumentation puts the raw arguments and result of a tool call.
RAW_ARGUMENTS = {"openinference": "input.value", "openllmetry": "gen_ai.tool.call.arguments"}
RAW_RESULT = {"openinference": "output.value", "openllmetry": "gen_ai.tool.call.result"}


def _would_block(span: Any) -> list:
    return [e for e in span.events if e.name == "loopguard.decision" and e.attributes["loopguard.decision"] == "would_block"]


def test_the_loop_runs_fully_and_every_tool_span_is_tagged(lc: Stack) -> None:
    invoked: list = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "delivered", "order": order_id}

    chat = model(repeat("lookup_order", {"order_id": "A12"}, 8) + ["Delivered."])
    out = run_agent(chat, [lookup_order])

    assert invoked == ["A12"] * 8  # observe only: nothing is stopped
    assert out["messages"][-1].content == "Delivered."
    assert not any("loop guard" in m.content for m in chat.tool_messages())

    spans = lc.spans()
    tools = lc.tool_spans(spans, "lookup_order")
    assert len(tools) == 8
    run_id = format(tools[0].context.trace_id, "032x")
    for span in tools:
        attrs = span.attributes
        assert all(tag in attrs for tag in CONTRACT_TAGS), sorted(set(CONTRACT_TAGS) - set(attrs))
        assert attrs["loopguard.mode"] == "observe" and attrs["loopguard.outcome"] == "ok"
        assert attrs["loopguard.run.id"] == run_id and attrs["loopguard.tool.name"] == "lookup_order"
        assert attrs["loopguard.key.id"] == lc.handle.key_id and KEY not in str(dict(attrs))
    assert [s.attributes["loopguard.seq"] for s in tools] == list(range(1, 9))
    turns = [s.attributes["loopguard.turn"] for s in tools]
    assert turns == sorted(set(turns))  # one model decision per call, in order

    # Equal calls, equal digests, although each raw payload carries its own tool_call_id.
    assert len({s.attributes["loopguard.args.digest"] for s in tools}) == 1
    assert len({s.attributes["loopguard.result.digest"] for s in tools}) == 1
    assert len({s.attributes[RAW_RESULT[lc.instrumentation]] for s in tools}) == 8
    if lc.instrumentation == "openllmetry":
        assert len({s.attributes[RAW_ARGUMENTS["openllmetry"]] for s in tools}) == 8  # the wrapper's ids

    blocked = [(i, e.attributes["loopguard.finding.kind"]) for i, s in enumerate(tools) for e in _would_block(s)]
    assert blocked[0] == (4, "repeat")  # where enforce mode would have stopped: the 5th call
    # (a run keeps going in observe mode, so later thresholds are marked too: no_progress at 6)
    assert not any(_would_block(s) for s in tools[:4])
    assert decision_events(spans, "deny") == []


def test_ping_pong_is_marked_where_enforce_mode_would_stop_it(lc: Stack) -> None:
    invoked: list = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "in transit"}

    @tool
    def get_shipping(order_id: str) -> dict:
        """Where the parcel is."""
        invoked.append(order_id)
        return {"carrier": "DHL"}

    script = [[("lookup_order" if i % 2 == 0 else "get_shipping", {"order_id": "A12"})] for i in range(8)]
    run_agent(model(script + ["In transit."]), [lookup_order, get_shipping])

    assert len(invoked) == 8
    tools = lc.tool_spans(lc.spans())
    assert len(tools) == 8
    blocked = [(i, e.attributes["loopguard.finding.kind"]) for i, s in enumerate(tools) for e in _would_block(s)]
    assert blocked[0] == (5, "cycle")  # the 6th call completes the third A-B block


def test_an_error_streak_is_marked_and_the_outcome_is_error(lc: Stack) -> None:
    invoked: list = []

    @tool
    def charge_card(order_id: str) -> str:
        """Charge the card on file for an order."""
        invoked.append(order_id)
        raise RuntimeError(f"card declined for {order_id}")

    handler = ToolErrorMiddleware(on_error=lambda exc, req: f"error: {exc}")
    script = [[("charge_card", {"order_id": f"A{i}"})] for i in range(6)]
    run_agent(model(script + ["Failed."]), [charge_card], [handler])

    assert len(invoked) == 6
    tools = lc.tool_spans(lc.spans(), "charge_card")
    assert [s.attributes["loopguard.outcome"] for s in tools] == ["error"] * 6
    blocked = [(i, e.attributes["loopguard.finding.kind"]) for i, s in enumerate(tools) for e in _would_block(s)]
    # The 4th failing decision completes the streak, but only its own failure tells: enforce
    # mode lets it run and denies the 5th, so that is the call marked.
    assert blocked[0] == (4, "error_streak")
