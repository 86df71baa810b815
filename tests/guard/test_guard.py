"""Enforce mode with plain Python tools: the denied call never runs (seed-000 runtime tests).

The fake tools count their own invocations outside the result they return, so a
guard that labels the result correctly but still executes the call fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_loopguard
from otel_loopguard.enforce import ToolGuard, make_guard

KEY = b"guard-test-key-0123456789"


def _guard(tmp_path: Any = None, policy: str | None = None) -> ToolGuard:
    path = None
    if policy is not None:
        path = tmp_path / "policy.yaml"
        path.write_text(policy, encoding="utf-8")
    return make_guard(key=KEY, policy=str(path) if path else None)


def test_the_stop_threshold_call_is_denied_before_it_runs() -> None:
    guard, invoked = _guard(), []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered", "version": 7}

    results = [lookup_order("A12") for _ in range(6)]
    assert invoked == ["A12"] * 4  # the 5th and 6th identical calls never ran
    assert all(isinstance(r, str) and r.startswith("Not executed: loop guard") for r in results[4:])
    assert "loop_guard_notice" in results[2] and "loop_guard_notice" not in results[1]  # warn nudges at 3
    assert "the run was stopped earlier" not in results[4] and "the run was stopped earlier" in results[5]


def test_a_method_tool_is_judged_on_its_arguments_not_on_its_objects_changing_state() -> None:
    guard = _guard()

    @dataclasses.dataclass
    class OrderTools:
        requests: int = 0  # in its repr, and it changes on every call: identical calls must not differ

        @guard.tool
        def lookup_order(self, order_id: str) -> dict:
            self.requests += 1
            return {"status": "delivered", "version": 7}

        @guard.tool(name="search")
        def search(self, query: str, limit: int = 5) -> dict:
            self.requests += 1
            return {"hits": [query]}

    tools = OrderTools()
    for n in range(6):  # negative control: different arguments (and new results) keep running
        tools.search(f"query {n}")
    assert tools.requests == 6
    results = [tools.lookup_order("A12") for _ in range(6)]
    assert tools.requests == 6 + 4  # the 5th and 6th identical calls never ran
    assert all(isinstance(r, str) and r.startswith("Not executed") for r in results[4:])


def test_seed_allowance_of_two_denies_the_third_call(tmp_path: Any) -> None:
    guard, invoked = _guard(tmp_path, "repeat: {allowed_repeats: 2}\n"), []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered", "version": 7}

    for _ in range(3):
        lookup_order("A12")
    assert invoked == ["A12", "A12"]  # call three is the first blocked dispatch


def test_negative_control_progress_keeps_the_guard_silent(tmp_path: Any) -> None:
    guard, invoked = _guard(tmp_path, "tools: {get_status: {progress: {version_field: version}}}\n"), []

    @guard.tool
    def get_status(job: str) -> dict:
        invoked.append(job)
        return {"state": "running", "version": len(invoked)}  # the version advances every time

    results = [get_status("j1") for _ in range(8)]
    assert len(invoked) == 8
    assert not any(isinstance(r, str) for r in results)


def test_different_arguments_with_new_results_are_never_denied() -> None:
    guard, invoked = _guard(), []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered", "order": order_id}

    for i in range(8):
        lookup_order(f"A{i}")
    assert len(invoked) == 8


def test_drifting_arguments_that_bring_nothing_new_are_stopped() -> None:
    # Different arguments, the same answer every time: no_progress stops the run at 6.
    guard, invoked = _guard(), []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered"}

    results = [lookup_order(f"A{i}") for i in range(8)]
    assert len(invoked) == 7 and results[-1].startswith("Not executed")


def test_check_does_not_change_the_run() -> None:
    guard = _guard()
    first = guard.check("lookup", {"id": 1}, run_id="r")
    again = guard.check("lookup", {"id": 1}, run_id="r")
    assert (first.action, again.action) == ("allow", "allow")


def test_a_side_effecting_tool_without_idempotency_key_is_observed_not_enforced(tmp_path: Any) -> None:
    guard, invoked = _guard(tmp_path, "tools: {send_email: {side_effect: true}}\n"), []

    @guard.tool
    def send_email(to: str) -> str:
        invoked.append(to)
        return "sent"

    for _ in range(6):
        send_email("a@example.com")
    assert len(invoked) == 6  # not enforced: a wrong deny could lose a real write


def test_a_write_repeated_with_another_idempotency_key_is_denied(tmp_path: Any) -> None:
    guard, invoked = _guard(tmp_path, "tools: {issue_refund: {idempotency_key: key}}\n"), []

    @guard.tool
    def issue_refund(order_id: str, amount: int, key: str) -> str:
        invoked.append(key)
        return "ok"

    issue_refund("A12", 10, key="k1")
    issue_refund("A12", 10, key="k1")  # the same key: a safe retry
    denied = issue_refund("A12", 10, key="k2")
    assert invoked == ["k1", "k1"]
    assert denied.startswith("Not executed: loop guard")


def test_async_tools_are_guarded_too() -> None:
    guard, invoked = _guard(), []

    @guard.tool(name="search")
    async def search(q: str) -> str:
        invoked.append(q)
        return "nothing new"

    async def agent() -> list:
        return [await search("x") for _ in range(6)]

    results = asyncio.run(agent())
    assert len(invoked) == 4 and results[-1].startswith("Not executed")


def _traced() -> tuple[InMemorySpanExporter, Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider.get_tracer("t")


def test_the_denial_is_recorded_before_any_span_of_the_denied_call() -> None:
    exporter, tracer = _traced()
    guard = _guard()

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        with tracer.start_as_current_span("execute_tool lookup_order"):
            return {"status": "delivered"}

    with tracer.start_as_current_span("invoke_agent"):
        for _ in range(5):
            lookup_order("A12")
        otel_loopguard.record_termination("loop_guard")
    spans = exporter.get_finished_spans()
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    root = [s for s in spans if s.name == "invoke_agent"][0]
    assert len(tools) == 4  # no span for the denied call
    denies = [e for e in root.events if e.attributes.get("loopguard.decision") == "deny"]
    assert len(denies) == 1 and denies[0].attributes["loopguard.finding.kind"] == "repeat"
    assert denies[0].timestamp >= max(t.end_time for t in tools)  # after the 4th ran, in place of the 5th
    assert root.attributes["loopguard.termination_reason"] == "loop_guard"


def test_record_termination_refuses_an_unknown_reason() -> None:
    with pytest.raises(ValueError, match="termination reason"):
        otel_loopguard.record_termination("gave_up")


def test_record_termination_outside_any_span_warns_instead_of_vanishing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="otel_loopguard"):
        otel_loopguard.record_termination("final_answer")
    assert "no span is current" in caplog.text


def test_record_termination_in_a_span_sampled_out_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    tracer = TracerProvider(sampler=ALWAYS_OFF).get_tracer("t")
    with caplog.at_level("WARNING", logger="otel_loopguard"), tracer.start_as_current_span("run"):
        otel_loopguard.record_termination("final_answer")  # not recorded, by the sampler's choice
    assert caplog.text == ""


def test_the_guard_takes_the_policy_from_the_environment_as_install_does(tmp_path: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "strict.yaml"
    path.write_text("version: strict-1\nrepeat:\n  warn_at: 2\n  stop_at: 2\n", encoding="utf-8")
    monkeypatch.setenv("OTEL_LOOPGUARD_POLICY", str(path))
    assert make_guard(key=KEY).policy.version == "strict-1"
    assert make_guard(key=KEY, policy=None).policy.version == "strict-1"
    monkeypatch.setenv("OTEL_LOOPGUARD_POLICY", f" {path}\n")  # read as install() reads it: stripped
    assert make_guard(key=KEY).policy.version == "strict-1"
    monkeypatch.delenv("OTEL_LOOPGUARD_POLICY")
    assert make_guard(key=KEY).policy.version != "strict-1"


def test_the_audit_scores_a_guarded_run_from_its_spans(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Enforce mode end to end: the denial event is what the score's guard fields read."""
    import json

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_loopguard.audit import audit

    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY.decode())
    exporter, tracer = _traced()
    guard = _guard()

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        result = {"status": "delivered", "version": 7}
        with tracer.start_as_current_span("execute_tool lookup_order") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "lookup_order")
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": order_id}))
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
        return result

    with tracer.start_as_current_span("invoke_agent"):
        for _ in range(5):
            lookup_order("A12")
        otel_loopguard.record_termination("loop_guard")
    path = tmp_path / "guarded.pb"
    path.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    (report,) = audit([path])
    score = report.score
    assert (score["guard_fired"], score["guard_before_dispatch"], score["guard_seq"]) == (True, True, 5)
    assert (score["executed_after_guard"], score["termination_reason"]) == (False, "loop_guard")
    assert report.passed is True


def test_the_guard_factory_can_be_called_again_after_the_adapters_are_imported() -> None:
    import otel_loopguard.enforce.decorator  # noqa: F401 - importing a subpackage must not shadow guard()

    first, second = otel_loopguard.guard(key=KEY), otel_loopguard.guard(key=KEY)
    assert type(first).__name__ == type(second).__name__ == "ToolGuard"


def _ping_pong(guard: ToolGuard, invoked: list, progress: bool = False) -> tuple[Any, Any]:
    count = iter(range(100))

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append("lookup")
        return {"status": "in transit", "checked": next(count) if progress else 0}

    @guard.tool
    def get_shipping(order_id: str) -> dict:
        invoked.append("shipping")
        return {"carrier": "DHL"}

    return lookup_order, get_shipping


def test_a_ping_pong_is_denied_before_it_completes_its_third_repetition() -> None:
    guard, invoked = _guard(), []
    lookup, shipping = _ping_pong(guard, invoked)
    results = [(lookup if i % 2 == 0 else shipping)("A12") for i in range(8)]
    assert invoked == ["lookup", "shipping", "lookup", "shipping", "lookup"]  # the 6th never ran
    assert all(isinstance(r, str) and r.startswith("Not executed: loop guard") for r in results[5:])
    assert "pattern" in results[5] and "try a different approach" in results[5]  # the cycle's reason
    assert "stopped earlier" in results[6]  # and the run stays stopped, whatever comes next
    assert "no further tool calls will run" in results[6]  # ... and the model is told to wrap up


def test_negative_control_a_ping_pong_that_makes_progress_runs_on() -> None:
    guard, invoked = _guard(), []
    lookup, shipping = _ping_pong(guard, invoked, progress=True)
    results = [(lookup if i % 2 == 0 else shipping)("A12") for i in range(8)]
    assert len(invoked) == 8
    assert not any(isinstance(r, str) and r.startswith("Not executed") for r in results)


def test_a_stop_denial_stops_the_run_for_every_tool() -> None:
    """As in observe mode, where the stop finding stops the run: the denied call never runs,
    so the denial itself must say so, or a different next call would slip through."""
    guard, invoked = _guard(), []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered"}

    for _ in range(5):
        lookup_order("A12")
    assert lookup_order("B7").startswith("Not executed: loop guard")
    assert invoked == ["A12"] * 4


def test_agents_with_their_own_guards_are_judged_apart_in_one_trace() -> None:
    """docs/guard.md: a subagent's stop denies the supervisor's next call when they share a
    guard (one run per trace), and does not when each has its own."""
    def loop_then_escalate(sub: ToolGuard, sup: ToolGuard) -> str:
        for _ in range(6):
            d = sub.check("lookup_order", {"order_id": "A12"}, run_id="trace-1")
            if not d.denied:
                sub.record(d, {"status": "delivered"}, True, run_id="trace-1")
        return sup.check("escalate_to_human", {"order_id": "A12"}, run_id="trace-1").action

    shared = make_guard(key=KEY)
    assert loop_then_escalate(shared, shared) == "deny"
    assert loop_then_escalate(make_guard(key=KEY), make_guard(key=KEY)) == "allow"


def _ran_or_denied(d: Any) -> str:
    """allow or deny: these tests are about what runs (warn-level nudges run too)."""
    return "deny" if d.action == "deny" else "allow"


def test_the_last_turn_of_a_turn_budget_runs_whole_and_the_next_is_denied(tmp_path: Any) -> None:
    """max_turns is the last turn allowed: its parallel siblings run; the next turn does not."""
    guard = _guard(tmp_path, "version: t\nbudget: {max_turns: 3, max_tool_calls: null, max_seconds: null}\n")
    actions = []
    for turn in (1, 2, 3, 4):
        for tool in ("a", "b"):
            d = guard.check(tool, {"x": turn}, run_id="r", turn=turn)
            actions.append(_ran_or_denied(d))
            if not d.denied:
                guard.record(d, "ok", True, run_id="r")
    assert actions == ["allow"] * 6 + ["deny", "deny"]


def test_another_stop_in_the_last_allowed_turn_ends_it_and_earlier_turns_do_not_come_back(tmp_path: Any) -> None:
    guard = _guard(tmp_path, "version: t\nbudget: {max_turns: 2, max_tool_calls: 3, max_seconds: null}\n")
    actions = []
    for turn, tool, x in [(1, "b", 0), (2, "a", 1), (2, "a", 2), (2, "c", 3), (2, "d", 4)]:
        d = guard.check(tool, {"x": x}, run_id="r", turn=turn)
        actions.append(_ran_or_denied(d))
        if not d.denied:
            guard.record(d, f"r{x}", True, run_id="r")
    assert actions == ["allow", "allow", "allow", "deny", "deny"]  # the call budget, reached in turn 2, stops it

    guard = _guard(tmp_path, "version: t2\nbudget: {max_turns: 3, max_tool_calls: null, max_seconds: null}\n")
    actions = []
    for turn in (1, 2, 3, 4, 1, 3):  # turn numbers seen before (another agent's counter) after the limit
        d = guard.check("a", {"x": len(actions)}, run_id="r", turn=turn)
        actions.append(_ran_or_denied(d))
        if not d.denied:
            guard.record(d, f"r{len(actions)}", True, run_id="r")
    assert actions == ["allow", "allow", "allow", "deny", "deny", "deny"]


def test_after_the_last_turn_is_over_the_turn_limit_stays_the_reason(tmp_path: Any) -> None:
    """An observe-only guard keeps recording the calls that run: a later stop among them (here a
    cap reached after the turn limit's turn) must not replace the turn limit as the reason, or
    its decisions no longer say what enforce mode would do."""
    path = tmp_path / "policy.yaml"
    path.write_text("version: t3\nbudget: {max_turns: 1, max_tool_calls: null, max_seconds: null}\n"
                    "tools:\n  a: {max_calls: 2}\n")
    decisions = {}
    for enforce in (True, False):
        guard = make_guard(key=KEY, policy=str(path), enforce=enforce)
        seen = []
        for turn, tool in [(1, "a"), (2, "a"), (2, "b"), (3, "a"), (3, "b")]:
            d = guard.check(tool, {"x": len(seen)}, run_id="r", turn=turn)
            seen.append((d.action, d.kind) if d.action == "deny" else ("allow", None))
            if not d.denied:
                guard.record(d, f"r{len(seen)}", True, run_id="r")
        decisions[enforce] = seen
    assert decisions[True] == [("allow", None)] + [("deny", "budget")] * 4
    assert decisions[False] == decisions[True]


def test_a_denial_inside_the_applications_own_tool_span_marks_it_not_dispatched(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The application opens its own execute_tool span around each decorated call: the denied
    calls' spans are marked dispatched=false with the guard's kind, so the audit counts the 4
    calls that ran (not 7) and finds nothing executed after the guard."""
    import json

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from otel_loopguard.audit import audit

    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY.decode())
    exporter, tracer = _traced()
    guard, invoked = _guard(), []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered", "version": 7}

    with tracer.start_as_current_span("invoke_agent"):
        for _ in range(7):
            with tracer.start_as_current_span("execute_tool lookup_order") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "lookup_order")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": "A12"}))
                result = lookup_order("A12")
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
        otel_loopguard.record_termination("loop_guard")
    spans = sorted((s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")),
                   key=lambda s: s.start_time or 0)
    assert len(invoked) == 4
    assert [s.attributes.get("loopguard.dispatched") for s in spans] == [None] * 4 + [False] * 3
    assert {s.attributes.get("loopguard.guard") for s in spans[4:]} == {"repeat"}
    path = tmp_path / "own-spans.pb"
    path.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    (report,) = audit([path])
    assert report.score["tool_calls"] == 4 and report.score["executed_after_guard"] is False
    assert report.score["guard_seq"] == 5 and report.passed is True, report.score["release"]


def test_negative_control_an_allowed_call_in_its_own_tool_span_is_not_marked() -> None:
    exporter, tracer = _traced()
    guard = _guard()

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        return {"status": "delivered", "order": order_id}

    with tracer.start_as_current_span("invoke_agent"):
        for n in range(4):
            with tracer.start_as_current_span("execute_tool lookup_order") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                lookup_order(f"A{n}")
    assert not any("loopguard.dispatched" in (s.attributes or {}) for s in exporter.get_finished_spans())


def test_a_denial_outside_any_tool_span_leaves_the_current_span_unmarked() -> None:
    """The run's own span is not a call: a deny event on it must not mark it not dispatched."""
    exporter, tracer = _traced()
    guard = _guard()

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        return {"status": "delivered"}

    with tracer.start_as_current_span("invoke_agent"):
        for _ in range(5):
            lookup_order("A12")
    (root,) = exporter.get_finished_spans()
    assert [e.attributes["loopguard.decision"] for e in root.events].count("deny") == 1
    assert "loopguard.dispatched" not in (root.attributes or {})


@pytest.mark.parametrize("enforce, verbs", [(True, ["warn", "warn", "deny"]),
                                            (False, ["would_warn", "would_warn", "would_block"])])
def test_an_observe_only_guard_records_what_it_would_do(enforce: bool, verbs: list) -> None:
    exporter, tracer = _traced()
    guard, invoked = make_guard(key=KEY, enforce=enforce), []

    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(order_id)
        return {"status": "delivered"}

    with tracer.start_as_current_span("invoke_agent"):
        results = [lookup_order("A12") for _ in range(5)]
    (root,) = exporter.get_finished_spans()
    assert [e.attributes["loopguard.decision"] for e in root.events] == verbs
    assert len(invoked) == (4 if enforce else 5)
    assert any("loop_guard_notice" in r for r in results if isinstance(r, dict)) is enforce  # nudged only when enforced


def test_a_turn_budget_nudges_the_first_call_of_each_turn_from_warn_ratio(tmp_path: Any) -> None:
    """Turn 20 of 25 (warn_ratio 0.8) is told where it stands; its sibling is not told twice."""
    guard = _guard(tmp_path, "version: t5\nbudget: {max_turns: 25, max_tool_calls: null, max_seconds: null}\n")
    nudged = []
    for turn in range(1, 23):
        for sibling in ("a", "b"):
            d = guard.check(sibling, {"turn": turn}, run_id="r", turn=turn)
            if d.action == "warn":
                nudged.append((turn, sibling, d.message))
            guard.record(d, f"r{turn}{sibling}", True, run_id="r")
    assert [(t, s) for t, s, _ in nudged] == [(20, "a"), (21, "a"), (22, "a")]
    assert nudged[0][2].startswith("[loop guard] this is turn 20 of the 25 the run may take. Change your approach")
