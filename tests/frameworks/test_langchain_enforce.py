"""Enforce mode in a real LangChain v1 agent: LoopGuardMiddleware in `create_agent`.

Scripted model, no network; install() tags spans (observe) while OpenInference or
OpenLLMetry instruments LangChain. The fake tools count their own invocations, so a
guard that only labels results but still runs the call fails.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents.middleware import ToolErrorMiddleware  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.tools import ToolException, tool  # noqa: E402

from otel_loopguard.enforce.langchain import LoopGuardMiddleware  # noqa: E402

from .lc_helpers import (  # noqa: E402,F401 - fixtures are used by name
    Stack,
    _clean_lc_env,
    children,
    decision_events,
    guard,
    model,
    repeat,
    run_agent,
    lc,
    lc_instrumented,
)

DENIED = "Not executed: loop guard"


def _lookup_tool(invoked: list) -> Any:
    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "delivered", "order": order_id}

    return lookup_order


def _denied_calls_started_no_tool_span(lc: Stack, spans: list) -> list:
    """The spans carrying deny events; none of them has a tool span under it."""
    denies = decision_events(spans, "deny")
    for span, _ in denies:
        assert not lc.tool_spans(children(spans, span)), f"a denied call has a tool span under {span.name}"
    return denies


@pytest.mark.parametrize("invoke", ["sync", "async"])
def test_exact_repeat_is_stopped_at_the_fifth_call_and_the_agent_finishes(lc: Stack, invoke: str) -> None:
    invoked: list = []
    chat = model(repeat("lookup_order", {"order_id": "A12"}, 8) + ["I could not find more."])
    the_guard = guard()

    out = run_agent(chat, [_lookup_tool(invoked)], [LoopGuardMiddleware(the_guard)], invoke=invoke)

    assert invoked == ["A12"] * 4  # the 5th..8th requests never reached the tool
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and final.content == "I could not find more."
    assert len(chat.seen) == 9  # the model got every result and answered

    results = chat.tool_messages()
    assert len(results) == 8
    fifth = results[4]
    assert fifth.content.startswith(DENIED) and fifth.status == "error"
    assert fifth.tool_call_id == "call_4_0"  # the denied call's own id: the model can pair it
    assert all(r.content.startswith(DENIED) for r in results[5:])
    assert not any(DENIED in r.content for r in results[:4])
    assert "[loop guard]" in results[2].content and "[loop guard]" in results[3].content  # warned at 3 and 4
    assert "[loop guard]" not in results[1].content and results[1].status == "success"

    spans = lc.spans()
    tools = lc.tool_spans(spans, "lookup_order")
    assert len(tools) == 4  # no tool span for any denied call
    denies = _denied_calls_started_no_tool_span(lc, spans)
    assert len(denies) == 4
    first_span, first = denies[0]
    assert first.attributes["loopguard.finding.kind"] == "repeat"
    assert first.attributes["loopguard.tool.name"] == "lookup_order"
    assert first.attributes["loopguard.dispatched"] is False
    assert first.timestamp >= max(t.end_time for t in tools)  # in place of the 5th, after the 4th ran
    warns = decision_events(spans, "warn")
    assert len(warns) == 2 and all(e.attributes["loopguard.dispatched"] is True for _, e in warns)
    # One run: the guard's trace is the one the processor tagged the tool spans with.
    run_id = format(first_span.context.trace_id, "032x")
    assert {t.attributes["loopguard.run.id"] for t in tools} == {run_id}
    # The nudge is added after the tool span ended: the processor still sees one result,
    # four times, and marks the repeat itself.
    assert len({t.attributes["loopguard.result.digest"] for t in tools}) == 1
    if lc.instrumentation == "openllmetry":  # its span keeps the argument names: the same action digest
        proposed = the_guard.check("lookup_order", {"order_id": "A12"}, run_id="digest-probe").ticket
        assert tools[0].attributes["loopguard.args.digest"] == proposed.action
    assert [[e.attributes["loopguard.finding.kind"] for e in t.events if e.name == "loopguard.decision"]
            for t in tools][2] == ["repeat"]


def test_ping_pong_is_stopped_as_a_cycle(lc: Stack) -> None:
    invoked: list = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(("lookup_order", order_id))
        return {"status": "in transit", "order": order_id}

    @tool
    def get_shipping(order_id: str) -> dict:
        """Where the parcel is."""
        invoked.append(("get_shipping", order_id))
        return {"carrier": "DHL", "order": order_id}

    script = [[("lookup_order" if i % 2 == 0 else "get_shipping", {"order_id": "A12"})] for i in range(10)]
    chat = model(script + ["Still in transit."])
    out = run_agent(chat, [lookup_order, get_shipping], [LoopGuardMiddleware(guard())])

    # A B A B A ran; the 6th call (B) would complete the block's third repetition with the
    # same results: denied before it runs, and the run stays stopped.
    assert invoked == [("lookup_order", "A12"), ("get_shipping", "A12")] * 2 + [("lookup_order", "A12")]
    assert out["messages"][-1].content == "Still in transit."
    results = chat.tool_messages()
    assert len(results) == 10
    assert not any(DENIED in r.content for r in results[:5])
    assert results[5].content.startswith(DENIED) and results[5].tool_call_id == "call_5_0"
    assert "pattern" in results[5].content  # the reason names the cycle
    assert all(r.status == "error" for r in results[5:])

    spans = lc.spans()
    assert len(lc.tool_spans(spans)) == 5
    denies = _denied_calls_started_no_tool_span(lc, spans)
    assert len(denies) == 5
    assert denies[0][1].attributes["loopguard.finding.kind"] == "cycle"
    assert denies[0][1].attributes["loopguard.tool.name"] == "get_shipping"  # the 6th call, a B


def _failing_setup(style: str, invoked: list) -> tuple[Any, list]:
    """A tool that always fails, and the middleware that turns the failure into an error ToolMessage."""
    if style == "toolexception":

        @tool
        def charge_card(order_id: str) -> str:
            """Charge the card on file for an order."""
            invoked.append(order_id)
            raise ToolException(f"card declined for {order_id}")

        charge_card.handle_tool_error = True
        return charge_card, [LoopGuardMiddleware(guard())]

    @tool
    def charge_card(order_id: str) -> str:  # type: ignore[no-redef]
        """Charge the card on file for an order."""
        invoked.append(order_id)
        raise RuntimeError(f"card declined for {order_id}")

    handler = ToolErrorMiddleware(on_error=lambda exc, req: f"error: {type(exc).__name__}: {exc}")
    if style == "guard-outermost":  # the guard sees the error ToolMessage
        return charge_card, [LoopGuardMiddleware(guard()), handler]
    return charge_card, [handler, LoopGuardMiddleware(guard())]  # the guard sees the exception


@pytest.mark.parametrize("style", ["guard-outermost", "guard-inside-error-handler", "toolexception"])
def test_error_streak_is_stopped_after_four_failing_decisions(lc: Stack, style: str) -> None:
    invoked: list = []
    failing, middleware = _failing_setup(style, invoked)
    # Different arguments each time: no repeat, only the streak of failures.
    chat = model([[("charge_card", {"order_id": f"A{i}"})] for i in range(8)] + ["The card keeps failing."])

    out = run_agent(chat, [failing], middleware)

    assert invoked == ["A0", "A1", "A2", "A3"]  # the 5th call (A4) is the first one denied
    assert out["messages"][-1].content == "The card keeps failing."
    results = chat.tool_messages()
    assert all(r.status == "error" for r in results)
    assert "card declined for A3" in results[3].content
    assert results[4].content.startswith(DENIED) and results[4].tool_call_id == "call_4_0"

    spans = lc.spans()
    tools = lc.tool_spans(spans, "charge_card")
    assert len(tools) == 4
    assert {t.attributes["loopguard.outcome"] for t in tools} == {"error"}
    denies = _denied_calls_started_no_tool_span(lc, spans)
    assert len(denies) == 4
    assert denies[0][1].attributes["loopguard.finding.kind"] == "error_streak"


def test_pagination_with_new_cursors_and_items_runs_to_completion(lc: Stack, tmp_path: Any) -> None:
    policy = "tools: {search_cases: {progress: {cursor_field: cursor, items_field: items, item_id_field: id}}}\n"
    invoked: list = []

    @tool
    def search_cases(query: str, cursor: str = "") -> dict:
        """Search support cases, one page at a time."""
        page = len(invoked)
        invoked.append(cursor)
        return {"items": [{"id": f"case-{page}-{i}"} for i in range(3)], "next_cursor": f"c{page + 1}"}

    script = [[("search_cases", {"query": "late orders", "cursor": f"c{page}" if page else ""})] for page in range(10)]
    chat = model(script + ["Found 30 cases."])
    out = run_agent(chat, [search_cases], [LoopGuardMiddleware(guard(tmp_path, policy))])

    assert len(invoked) == 10
    assert out["messages"][-1].content == "Found 30 cases."
    assert not any("loop guard" in r.content for r in chat.tool_messages())
    assert decision_events(lc.spans()) == []


def test_polling_with_progress_runs_to_completion(lc: Stack, tmp_path: Any) -> None:
    policy = "tools: {get_export_status: {progress: {version_field: version}}}\n"
    invoked: list = []

    @tool
    def get_export_status(job: str) -> dict:
        """Poll an export job."""
        invoked.append(job)
        return {"state": "running", "version": len(invoked)}  # the same call, advancing every time

    chat = model(repeat("get_export_status", {"job": "j1"}, 10) + ["The export is still running."])
    out = run_agent(chat, [get_export_status], [LoopGuardMiddleware(guard(tmp_path, policy))])

    assert invoked == ["j1"] * 10
    assert out["messages"][-1].content == "The export is still running."
    assert not any("loop guard" in r.content for r in chat.tool_messages())
    spans = lc.spans()
    assert len(lc.tool_spans(spans, "get_export_status")) == 10
    assert decision_events(spans, "deny") == [] and decision_events(spans, "warn") == []


def test_identical_calls_in_one_model_turn_are_not_repeats(lc: Stack) -> None:
    invoked: list = []
    # Three turns with one call, then one turn asking for the same call three times in parallel.
    # Counted per call that would be the 4th, 5th and 6th identical call: a deny. Counted per
    # decision it is the 4th decision: a warning, and all three run.
    parallel = [("lookup_order", {"order_id": "A12"})] * 3
    chat = model(repeat("lookup_order", {"order_id": "A12"}, 3) + [parallel, "Delivered."])
    # One tool task at a time, so each sibling is checked after the previous one was recorded.
    out = run_agent(chat, [_lookup_tool(invoked)], [LoopGuardMiddleware(guard())], config={"max_concurrency": 1})

    assert invoked == ["A12"] * 6
    assert out["messages"][-1].content == "Delivered."
    results = chat.tool_messages()
    assert len(results) == 6 and {r.status for r in results} == {"success"}
    assert not any(DENIED in r.content for r in results)
    assert decision_events(lc.spans(), "deny") == []


def test_each_invocation_is_its_own_run(lc: Stack) -> None:
    """One middleware for the whole app: a new trace starts a new run, with nothing stopped."""
    middleware = LoopGuardMiddleware(guard())
    first: list = []
    run_agent(model(repeat("lookup_order", {"order_id": "A12"}, 6) + ["x"]), [_lookup_tool(first)], [middleware])
    second: list = []
    run_agent(model(repeat("lookup_order", {"order_id": "A12"}, 4) + ["y"]), [_lookup_tool(second)], [middleware])
    assert len(first) == 4 and len(second) == 4
    spans = lc.spans()
    assert len({s.context.trace_id for s in spans}) == 2
    assert len(decision_events(spans, "deny")) == 2  # both from the first run
