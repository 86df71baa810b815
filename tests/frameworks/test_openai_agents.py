"""Enforce mode in a real OpenAI Agents SDK run: the adapter's tool guardrails.

Each test drives Runner.run with a scripted model (no network) under
otel_loopguard.install() and an OTel bridge (OpenInference and OpenLLMetry). The
fake tools count their own invocations and open a span of their own while they
run, so a call that is labelled denied but still executed fails the test.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

pytest.importorskip("agents")  # the `agents` extra

from agents import function_tool  # noqa: E402

from otel_loopguard.enforce import ToolGuard, make_guard  # noqa: E402
from otel_loopguard.enforce.openai_agents import guard_tools, loopguard_tool_guardrails  # noqa: E402

from .agents_helpers import (  # noqa: E402,F401 - fixtures are used by name
    DENIED_PREFIX,
    KEY,
    NUDGE_PREFIX,
    AgentsStack,
    _clean_agents_env,
    guard_events,
    processor_events,
    repeat,
    run_agent,
    stack,
    stacks,
)


def _guard(tmp_path: Any = None, policy: Optional[str] = None, enforce: bool = True) -> ToolGuard:
    path = None
    if policy is not None:
        path = tmp_path / "policy.yaml"
        path.write_text(policy, encoding="utf-8")
    return make_guard(key=KEY, policy=str(path) if path else None, enforce=enforce)


class FakeTools:
    """Function tools that record every real invocation and open a body span while running."""

    def __init__(self, stack: Optional[AgentsStack] = None):
        self.invoked: list[tuple[str, dict[str, Any]]] = []
        self._tracer = stack.tracer if stack is not None else None
        self._polls = 0

    def _ran(self, tool: str, **args: Any) -> None:
        self.invoked.append((tool, args))
        if self._tracer is not None:
            self._tracer.start_span(f"{tool}.body").end()

    def calls(self, tool: str) -> int:
        return sum(1 for t, _ in self.invoked if t == tool)

    def all(self) -> list[Any]:
        @function_tool
        def lookup_order(order_id: str) -> dict:
            """Look up an order."""
            self._ran("lookup_order", order_id=order_id)
            return {"order": order_id, "status": "in transit"}

        @function_tool
        def get_customer(customer_id: str) -> dict:
            """Look up a customer."""
            self._ran("get_customer", customer_id=customer_id)
            return {"customer": customer_id, "tier": "gold"}

        @function_tool
        def fetch_invoice(invoice_id: str) -> str:
            """Fetch an invoice (the billing service is down)."""
            self._ran("fetch_invoice", invoice_id=invoice_id)
            raise RuntimeError("billing service unavailable")

        @function_tool
        def search_cases(query: str, cursor: Optional[str] = None) -> dict:
            """Search support cases, one page at a time."""
            self._ran("search_cases", query=query, cursor=cursor)
            page = 0 if cursor is None else int(cursor.split("-")[1])
            return {"items": [{"id": f"case-{page}-{i}"} for i in range(3)], "next_cursor": f"p-{page + 1}"}

        @function_tool
        def get_status(job_id: str) -> dict:
            """Poll a job."""
            self._ran("get_status", job_id=job_id)
            self._polls += 1
            return {"job": job_id, "state": "running", "version": self._polls}

        return [lookup_order, get_customer, fetch_invoice, search_cases, get_status]


A12 = ("lookup_order", {"order_id": "A12"})
C7 = ("get_customer", {"customer_id": "C7"})


def _body_spans(stack: AgentsStack, tool: str) -> list[Any]:
    return [s for s in stack.spans() if s.name == f"{tool}.body"]


def _denied(outputs: list[str]) -> list[int]:
    """1-based positions of the calls whose output was the guard's denial."""
    return [i for i, out in enumerate(outputs, start=1) if out.startswith(DENIED_PREFIX)]


# -- enforce: loops are stopped before the call runs -------------------------------------

def test_exact_repeat_is_denied_at_the_fifth_call_and_the_run_goes_on(stack: AgentsStack) -> None:
    tools, guard = FakeTools(stack), _guard()
    result, model = run_agent(tools.all(), repeat(A12, 8) + ["done"], guard=guard)

    assert tools.invoked == [("lookup_order", {"order_id": "A12"})] * 4  # the 5th..8th never ran
    assert result.final_output == "done" and model.requests == 9  # not killed: the model answered
    outputs = model.tool_outputs()
    assert len(outputs) == 8 and _denied(outputs) == [5, 6, 7, 8]
    assert "not run" in outputs[4] and "repeat" not in outputs[3]
    assert NUDGE_PREFIX in outputs[2] and NUDGE_PREFIX not in outputs[1]  # warn nudges from the 3rd

    spans = stack.tool_spans("lookup_order")
    # The SDK opens a function span before any guardrail runs, so each denied call still
    # has one: it carries the deny event and is marked as not dispatched; nothing ran in it.
    assert len(spans) == 8
    fifth = spans[4]
    [deny] = guard_events(fifth, "deny")
    assert deny["loopguard.finding.kind"] == "repeat" and deny["loopguard.dispatched"] is False
    assert deny["loopguard.tool.name"] == "lookup_order"
    assert (fifth.attributes or {})["loopguard.dispatched"] is False
    assert (fifth.attributes or {})["loopguard.guard"] == "repeat"
    assert [bool(guard_events(s, "deny")) for s in spans] == [False] * 4 + [True] * 4
    assert all("loopguard.dispatched" not in (s.attributes or {}) for s in spans[:4])
    bodies = _body_spans(stack, "lookup_order")
    assert len(bodies) == 4 and {b.parent.span_id for b in bodies} == {s.context.span_id for s in spans[:4]}
    # The processor still tagged every tool span (observe tagging next to enforcement).
    assert all((s.attributes or {}).get("loopguard.seq") for s in spans)
    assert [bool(guard_events(s, "warn")) for s in spans[:4]] == [False, False, True, True]


def test_ping_pong_is_stopped_before_its_third_repetition(stack: AgentsStack) -> None:
    # lookup_order, get_customer, lookup_order, ... with the same results: the 6th call would
    # complete the 3rd repetition, so it is the first one denied, before it runs.
    tools, guard = FakeTools(stack), _guard()
    script = [[A12] if i % 2 == 0 else [C7] for i in range(10)] + ["done"]
    result, model = run_agent(tools.all(), script, guard=guard)

    assert (tools.calls("lookup_order"), tools.calls("get_customer")) == (3, 2)
    assert result.final_output == "done"
    assert _denied(model.tool_outputs()) == [6, 7, 8, 9, 10]  # the run stays stopped
    spans = stack.tool_spans()
    denies = [e for s in spans for e in guard_events(s, "deny")]
    assert len(denies) == 5 and {d["loopguard.finding.kind"] for d in denies} == {"cycle"}
    assert guard_events(spans[5], "deny") and not guard_events(spans[4], "deny")  # on the 6th call's span


def test_error_streak_is_stopped_after_four_failed_turns(stack: AgentsStack) -> None:
    # A different invoice each time (no repeat), every one fails: the 4th failed decision
    # stops the run, so the 5th call is the first denied.
    tools, guard = FakeTools(stack), _guard()
    script = [[("fetch_invoice", {"invoice_id": f"I{i}"})] for i in range(7)] + ["done"]
    result, model = run_agent(tools.all(), script, guard=guard)

    assert [a["invoice_id"] for _, a in tools.invoked] == ["I0", "I1", "I2", "I3"]
    assert result.final_output == "done"
    outputs = model.tool_outputs()
    assert _denied(outputs) == [5, 6, 7]
    assert outputs[0].startswith("An error occurred while running the tool")  # the SDK's failure text
    spans = stack.tool_spans("fetch_invoice")
    [deny] = guard_events(spans[4], "deny")
    assert deny["loopguard.finding.kind"] == "error_streak"


# -- enforce: negative controls -------------------------------------------------------------

def test_pagination_with_new_cursors_and_items_is_never_denied(stack: AgentsStack) -> None:
    tools, guard = FakeTools(stack), _guard()
    script = [[("search_cases", {"query": "refund", "cursor": None if p == 0 else f"p-{p}"})] for p in range(8)]
    result, model = run_agent(tools.all(), script + ["done"], guard=guard)

    assert tools.calls("search_cases") == 8 and result.final_output == "done"
    assert _denied(model.tool_outputs()) == []
    assert not any(NUDGE_PREFIX in out for out in model.tool_outputs())
    assert not [e for s in stack.tool_spans() for e in guard_events(s)]


def test_polling_with_declared_progress_is_never_denied(stack: AgentsStack, tmp_path: Any) -> None:
    tools = FakeTools(stack)
    guard = _guard(tmp_path, "tools: {get_status: {progress: {version_field: version}}}\n")
    result, model = run_agent(tools.all(), repeat(("get_status", {"job_id": "J1"}), 8) + ["done"], guard=guard)

    assert tools.calls("get_status") == 8 and result.final_output == "done"
    assert _denied(model.tool_outputs()) == []
    assert not [e for s in stack.tool_spans() for e in guard_events(s)]


@pytest.mark.parametrize("same_arguments", [True, False])
def test_a_loop_of_runner_runs_in_one_trace_is_a_loop(stack: AgentsStack, same_arguments: bool) -> None:
    """A supervisor calling Runner.run again and again inside one trace: each run's Usage
    counts its model requests from 1, but the run is the trace, so the calls are not the
    parallel siblings of one turn. The 5th identical call is denied."""
    tools, guard = FakeTools(stack), _guard()
    with stack.tracer.start_as_current_span("supervisor"):
        for n in range(7):
            call = A12 if same_arguments else ("lookup_order", {"order_id": f"A{n}"})
            run_agent(tools.all(), [[call], "done"], guard=guard)
    if same_arguments:
        assert tools.calls("lookup_order") == 4  # the 5th to 7th never ran
        assert [bool(guard_events(s, "deny")) for s in stack.tool_spans("lookup_order")] == [False] * 4 + [True] * 3
    else:  # negative control: a supervisor asking about other orders is no loop
        assert tools.calls("lookup_order") == 7
        assert not [e for s in stack.tool_spans() for e in guard_events(s, "deny")]


def test_parallel_identical_calls_of_one_turn_are_not_repeats(stack: AgentsStack) -> None:
    # Two turns of four identical parallel calls: two decisions, not eight calls in a row
    # (counted one per call, the 5th would be denied).
    tools, guard = FakeTools(stack), _guard()
    result, model = run_agent(tools.all(), [[A12] * 4, [A12] * 4, "done"], guard=guard)

    assert tools.calls("lookup_order") == 8 and result.final_output == "done"
    assert _denied(model.tool_outputs()) == []
    assert not [e for s in stack.tool_spans() for e in guard_events(s)]


# -- observe ----------------------------------------------------------------------------------

def test_observe_guard_lets_the_loop_run_and_reports_would_block(stack: AgentsStack) -> None:
    tools, guard = FakeTools(stack), _guard(enforce=False)
    result, model = run_agent(tools.all(), repeat(A12, 8) + ["done"], guard=guard)

    assert tools.calls("lookup_order") == 8 and result.final_output == "done"
    outputs = model.tool_outputs()
    assert _denied(outputs) == [] and not any(NUDGE_PREFIX in out for out in outputs)  # input untouched
    spans = stack.tool_spans("lookup_order")
    would = [i for i, s in enumerate(spans, start=1) if guard_events(s, "would_block")]
    assert would == [5, 6, 7, 8]
    assert all(e["loopguard.dispatched"] is True for s in spans for e in guard_events(s, "would_block"))
    assert all("loopguard.dispatched" not in (s.attributes or {}) for s in spans)
    _assert_observe_tags(spans)


def test_install_alone_tags_tool_spans_and_reports_would_block(stack: AgentsStack) -> None:
    tools = FakeTools(stack)
    result, _ = run_agent(tools.all(), repeat(A12, 8) + ["done"])

    assert tools.calls("lookup_order") == 8 and result.final_output == "done"
    spans = stack.tool_spans("lookup_order")
    assert not [e for s in spans for e in guard_events(s)]
    _assert_observe_tags(spans)


def _assert_observe_tags(spans: list[Any]) -> None:
    assert len(spans) == 8
    tags = [dict(s.attributes or {}) for s in spans]
    assert [t["loopguard.seq"] for t in tags] == list(range(1, 9))
    assert {t["loopguard.tool.name"] for t in tags} == {"lookup_order"}
    assert len({t["loopguard.args.digest"] for t in tags}) == 1
    assert {t["loopguard.mode"] for t in tags} == {"observe"}
    assert {t["loopguard.run.id"] for t in tags} == {format(spans[0].context.trace_id, "032x")}
    blocked = [i for i, s in enumerate(spans, start=1) if processor_events(s, "would_block")]
    assert blocked and blocked[0] == 5
    assert processor_events(spans[4], "would_block")[0]["loopguard.finding.kind"] == "repeat"


# -- the adapter itself -----------------------------------------------------------------------

def test_runs_without_an_otel_trace_are_judged_apart(stacks: Any) -> None:
    # No bridge: no OTel trace, so each Runner.run is its own run. Four identical calls in
    # each of two runs must not add up to a denial.
    stacks(None, installed=False)
    guard = _guard()
    for _ in range(2):
        tools = FakeTools()
        result, model = run_agent(tools.all(), repeat(A12, 4) + ["done"], guard=guard)
        assert tools.calls("lookup_order") == 4 and _denied(model.tool_outputs()) == []


def test_attaching_is_idempotent_and_keeps_the_applications_guardrails() -> None:
    from agents import ToolGuardrailFunctionOutput, tool_input_guardrail, tool_output_guardrail

    @tool_input_guardrail
    def app_input(data: Any) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.allow()

    @tool_output_guardrail
    def app_output(data: Any) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[app_input], tool_output_guardrails=[app_output])
    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        return "ok"

    rails = loopguard_tool_guardrails(_guard())
    guard_tools(rails, [lookup_order, "not a function tool"])
    guard_tools(rails, [lookup_order])
    assert [g.get_name() for g in lookup_order.tool_input_guardrails] == ["app_input", "otel_loopguard.check"]
    assert [g.get_name() for g in lookup_order.tool_output_guardrails] == [
        "otel_loopguard.record", "app_output", "otel_loopguard.nudge"]


# -- what the audit makes of the exported spans -------------------------------------------------

def _audit(stack: AgentsStack, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_loopguard.audit.command import audit
    from otel_loopguard.audit.report import to_json

    path = tmp_path / "spans.pb"
    path.write_bytes(encode_spans(stack.spans()).SerializeToString())
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)  # the processor's digest key
    [run] = json.loads(to_json(audit([path])))["runs"]
    return run


def test_the_audit_counts_the_denied_calls_as_not_run(stack: AgentsStack, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    run_agent(FakeTools(stack).all(), repeat(A12, 8) + ["done"], guard=_guard())
    score = _audit(stack, tmp_path, monkeypatch)["score"]
    assert score["tool_calls"] == 4  # the four denied function spans are not counted as calls
    assert (score["guard_fired"], score["guard_seq"], score["guard_before_dispatch"]) == (True, 5, True)
    assert score["executed_after_guard"] is False


def test_the_audit_sees_no_progress_in_the_warned_calls(stack: AgentsStack, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    run_agent(FakeTools(stack).all(), repeat(A12, 8) + ["done"], guard=_guard())
    run = _audit(stack, tmp_path, monkeypatch)
    assert run["score"]["progress_observed"] is False
    assert "repeat" in {f["kind"] for f in run["findings"]}
