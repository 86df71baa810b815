"""Observe-only: a call that enforce mode would deny gets a `loopguard.decision` event."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import pytest

from .helpers import Stack, captured, decisions, emit, emit_turn, fresh_noise, replaced, tags

DECISION_KEYS = {
    "loopguard.decision",
    "loopguard.finding.kind",
    "loopguard.finding.severity",
    "loopguard.finding.reason",
    "loopguard.policy.version",
}


def _genai_call(result: object, args: str = '{"order_id": "A-1"}') -> dict[str, object]:
    attrs = dict(captured("genai_tool")["attributes"])
    attrs["gen_ai.tool.call.arguments"] = args
    attrs["gen_ai.tool.call.result"] = json.dumps(result)
    return attrs


def _policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text("version: progress-test-1\ntools:\n  lookup_order:\n    progress:\n      version_field: version\n")
    return str(path)


@pytest.mark.parametrize("entry", ["genai_tool", "oi_lc_tool_1", "tl_lc_tool_1", "oi_oa_tool"])
def test_five_identical_calls_would_warn_at_three_and_would_block_at_five(stack: Stack, entry: str) -> None:
    with stack.tracer.start_as_current_span("agent"):
        for _ in range(5):
            emit_turn(stack.tracer, entry)  # per-call noise differs, the call does not
    calls = stack.tool_spans()
    assert [tags(s)["loopguard.seq"] for s in calls] == [1, 2, 3, 4, 5]
    repeat = [decisions(s, "repeat") for s in calls]
    assert repeat[0] == repeat[1] == repeat[3] == []
    assert decisions(calls[0]) == decisions(calls[1]) == [], "nothing to decide on the first two calls"
    [warn], [block] = repeat[2], repeat[4]
    assert warn["loopguard.decision"] == "would_warn" and warn["loopguard.finding.severity"] == "warn"
    assert block["loopguard.decision"] == "would_block" and block["loopguard.finding.severity"] == "stop"
    for event in (warn, block):
        assert set(event) == DECISION_KEYS
        assert event["loopguard.policy.version"] == "builtin-1"
        assert "lookup_order" in event["loopguard.finding.reason"]
    # Observe-only: the calls still happened and were exported, the span itself is intact.
    assert all(tags(s)["loopguard.mode"] == "observe" for s in calls)


def test_decision_event_sits_at_the_end_of_the_call(stack: Stack) -> None:
    with stack.tracer.start_as_current_span("agent"):
        for _ in range(5):
            emit_turn(stack.tracer, "genai_tool")
    last = stack.tool_spans()[-1]
    [event] = [e for e in last.events if e.name == "loopguard.decision"]
    assert event.timestamp == last.end_time


def test_changing_results_are_progress_no_decisions(stack: Stack) -> None:
    tracer = stack.tracer
    with tracer.start_as_current_span("agent"):
        for i in range(8):
            emit(tracer, captured("genai_chat"))
            emit(tracer, captured("genai_tool"), attributes=_genai_call({"status": "pending", "checked": i}))
    calls = stack.tool_spans()
    assert len({tags(s)["loopguard.args.digest"] for s in calls}) == 1
    assert [decisions(s) for s in calls] == [[]] * 8


@pytest.mark.parametrize("how", ["argument", "env"])
def test_advancing_version_under_a_declared_progress_rule_is_progress(
    stacks: Callable[..., Stack], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "env":
        monkeypatch.setenv("OTEL_LOOPGUARD_POLICY", _policy(tmp_path))
        stack = stacks()
    else:
        stack = stacks(policy=_policy(tmp_path))
    tracer = stack.tracer
    with tracer.start_as_current_span("agent"):
        for version in range(1, 9):
            emit(tracer, captured("genai_chat"))
            emit(tracer, captured("genai_tool"), attributes=_genai_call({"status": "pending", "version": version}))
    assert [decisions(s) for s in stack.tool_spans()] == [[]] * 8


def test_a_declared_rule_overrides_result_novelty_positive_control(stacks: Callable[..., Stack], tmp_path: Path) -> None:
    """Results change (a timestamp-ish field) but the declared version stands still: no progress."""
    stack = stacks(policy=_policy(tmp_path))
    tracer = stack.tracer
    with tracer.start_as_current_span("agent"):
        for i in range(5):
            emit(tracer, captured("genai_chat"))
            emit(tracer, captured("genai_tool"), attributes=_genai_call({"version": 3, "checked": i}))
    calls = stack.tool_spans()
    assert [d["loopguard.decision"] for d in decisions(calls[4], "repeat")] == ["would_block"]
    assert decisions(calls[4], "repeat")[0]["loopguard.policy.version"] == "progress-test-1"


def test_parallel_siblings_of_one_decision_get_no_repeat_decision(stack: Stack) -> None:
    tracer = stack.tracer
    tool = captured("genai_tool")
    with tracer.start_as_current_span("agent"):
        emit(tracer, captured("genai_chat"))
        t0 = time.time_ns()
        for i in range(6):  # one decision asked for the same call six times, all in flight together
            emit(tracer, tool, start=t0 + 1_000 + i, end=t0 + 50_000 + i * 7)
    calls = stack.tool_spans()
    assert [tags(s)["loopguard.turn"] for s in calls] == [1] * 6
    assert [decisions(s, "repeat") for s in calls] == [[]] * 6
    assert [decisions(s) for s in calls] == [[]] * 6, "parallel_duplicate is info: not a decision"


def test_langgraph_style_cousin_calls_of_two_decisions_do_not_reach_the_warn_level(stack: Stack) -> None:
    """Two decisions, each with two identical calls (own `tools` parent each): a count of 2, not 4."""
    tracer = stack.tracer
    tool = captured("tl_lc_tool_1")
    with tracer.start_as_current_span("order_agent"):
        for _ in range(2):
            emit(tracer, captured("tl_lc_chat"))
            for _ in range(2):
                with tracer.start_as_current_span("execute_task tools"):
                    emit(tracer, tool, attributes=fresh_noise(tool["attributes"]))
    calls = stack.tool_spans()
    assert [tags(s)["loopguard.turn"] for s in calls] == [1, 1, 2, 2]
    assert [decisions(s, "repeat") for s in calls] == [[]] * 4


def test_different_arguments_each_turn_get_no_decisions(stack: Stack) -> None:
    base = captured("tl_lc_tool_1")["attributes"]
    with stack.tracer.start_as_current_span("agent"):
        for i in range(10):
            emit_turn(stack.tracer, "tl_lc_tool_1", attributes=replaced(replaced(base, "A-1", f"Z-{i}"), "pending", f"state {i}"))
    assert [decisions(s) for s in stack.tool_spans()] == [[]] * 10


def test_a_call_after_the_cost_budget_is_spent_would_be_blocked(stacks: Callable[..., Stack], tmp_path: Path) -> None:
    policy = tmp_path / "cost.yaml"
    policy.write_text("version: cost-1\nbudget:\n  max_cost_usd: 1.0\nprices:\n  '*': {input: 100000, output: 100000}\n")
    stack = stacks(policy=str(policy))
    tracer = stack.tracer
    chat = dict(captured("genai_chat")["attributes"], **{"gen_ai.usage.input_tokens": 10_000})  # $1000 per decision
    with tracer.start_as_current_span("agent"):
        for i in range(3):
            emit(tracer, captured("genai_chat"), attributes=chat)
            emit(tracer, captured("genai_tool"), attributes=_genai_call({"n": i}, args=json.dumps({"order_id": f"A-{i}"})))
    budget = [d for s in stack.tool_spans() for d in decisions(s, "budget")]
    assert any(d["loopguard.decision"] == "would_block" for d in budget)


def test_a_long_conversation_still_numbers_turns_and_flags_a_loop(stacks: Callable[..., Stack]) -> None:
    stack = stacks(run_id_attribute="gen_ai.conversation.id")
    tracer = stack.tracer
    chat = dict(captured("genai_chat")["attributes"], **{"gen_ai.conversation.id": "long-chat"})
    tool = dict(captured("genai_tool")["attributes"], **{"gen_ai.conversation.id": "long-chat"})
    for _ in range(4100):  # a long-lived assistant conversation: many model calls over many traces
        emit(tracer, captured("genai_chat"), attributes=chat)
    for _ in range(5):
        emit(tracer, captured("genai_chat"), attributes=chat)
        emit(tracer, captured("genai_tool"), attributes=tool)
    calls = stack.tool_spans()
    turns = [tags(s)["loopguard.turn"] for s in calls]
    assert len(set(turns)) == 5, f"each call has its own decision, got turns {turns}"
    assert [d["loopguard.decision"] for d in decisions(calls[4], "repeat")] == ["would_block"]


def _cap_policy(tmp_path: Path) -> str:
    path = tmp_path / "cap.yaml"
    path.write_text("version: cap-test-1\ntools:\n  lookup_order:\n    max_calls: 2\n")
    return str(path)


@pytest.mark.parametrize("calls, blocked", [(3, [False, False, True]), (2, [False, False])])
def test_a_cap_would_block_the_call_past_it_as_enforce_mode_does(
    stacks: Callable[..., Stack], tmp_path: Path, calls: int, blocked: list[bool]
) -> None:
    """The cap's stop fires on the call that reaches it; enforce mode runs that call and denies
    the next. So would_block marks the next call, and a run that stops at the cap has none."""
    stack = stacks(policy=_cap_policy(tmp_path))
    with stack.tracer.start_as_current_span("agent"):
        for n in range(calls):
            emit(stack.tracer, {"name": "execute_tool lookup_order", "status": "OK"},
                 attributes=_genai_call({"n": n}, args=json.dumps({"order_id": f"A-{n}"})))
    marks = [[e for e in decisions(s) if e["loopguard.decision"] == "would_block"] for s in stack.tool_spans()]
    assert [bool(m) for m in marks] == blocked
    if calls == 3:
        assert marks[2][0]["loopguard.finding.kind"] == "tool_cap"


def test_the_guard_denies_the_same_call_observe_only_marks(tmp_path: Path) -> None:
    from otel_loopguard.enforce import make_guard

    guard = make_guard(key=b"decisions-test-key-0123", policy=_cap_policy(tmp_path))
    verdicts = []
    for n in range(3):
        decision = guard.check("lookup_order", {"order_id": f"A-{n}"}, run_id="r")
        verdicts.append(decision.action)
        if decision.action != "deny":
            guard.record(decision, {"n": n}, True, run_id="r")
    assert verdicts == ["allow", "warn", "deny"]  # the cap's last call is nudged (warn_ratio 0.8 of 2)


@pytest.mark.parametrize("policy, calls", [(None, 8), ("cap", 6)])
def test_every_call_after_a_stop_would_block_as_enforce_mode_denies_it(
    stacks: Callable[..., Stack], tmp_path: Path, policy: str | None, calls: int
) -> None:
    """Enforce mode keeps a stopped run stopped: the guard denies every later call. Observe-only
    marks exactly the calls the guard denies, so a rollout review counts what enforce would do."""
    from otel_loopguard.enforce import make_guard

    path = _cap_policy(tmp_path) if policy else None
    stack = stacks(policy=path)
    guard = make_guard(key=b"decisions-test-key-0123", policy=path)
    denied = []
    with stack.tracer.start_as_current_span("agent"):
        for n in range(calls):
            args = {"order_id": "A-1"} if policy is None else {"order_id": f"A-{n}"}  # a loop / fresh calls
            result = {"status": "delivered"} if policy is None else {"n": n}
            emit(stack.tracer, {"name": "execute_tool lookup_order", "status": "OK"},
                 attributes=_genai_call(result, args=json.dumps(args)))
            decision = guard.check("lookup_order", args, run_id="r")
            denied.append(decision.action == "deny")
            if not decision.denied:
                guard.record(decision, result, True, run_id="r")
    marked = [any(e["loopguard.decision"] == "would_block" for e in decisions(s)) for s in stack.tool_spans()]
    assert marked == denied and marked.count(True) >= 2
    later = [[e["loopguard.finding.reason"] for e in decisions(s) if e["loopguard.decision"] == "would_block"]
             for s in stack.tool_spans()[marked.index(True) + 1:]]
    if policy is None:
        assert any(r.startswith("the run was stopped earlier") for reasons in later for r in reasons), later
    else:  # a cap stops its tool, not the run: every later call of that tool is marked with the cap
        assert all(reasons and all("its cap is 2" in r for r in reasons) for reasons in later), later


def test_a_cap_marks_later_calls_of_its_tool_only(stacks: Callable[..., Stack], tmp_path: Path) -> None:
    """docs/rollout.md: a per-tool cap refuses that tool only; the run goes on with the others,
    and the guard agrees call by call."""
    from otel_loopguard.enforce import make_guard

    path = _cap_policy(tmp_path)
    stack = stacks(policy=path)
    guard = make_guard(key=b"decisions-test-key-0123", policy=path)
    denied = []
    with stack.tracer.start_as_current_span("agent"):
        for n in range(6):
            tool = "lookup_order" if n % 2 == 0 else "search_cases"
            args, result = {"q": f"A-{n}"}, {"n": n}
            emit(stack.tracer, {"name": f"execute_tool {tool}", "status": "OK"},
                 attributes={**_genai_call(result, args=json.dumps(args)), "gen_ai.tool.name": tool})
            decision = guard.check(tool, args, run_id="r")
            denied.append(decision.action == "deny")
            if not decision.denied:
                guard.record(decision, result, True, run_id="r")
    marked = [any(e["loopguard.decision"] == "would_block" for e in decisions(s)) for s in stack.tool_spans()]
    assert denied == [False, False, False, False, True, False]  # the 3rd lookup_order only
    assert marked == denied


def test_a_budget_crossed_by_model_spans_does_not_stop_later_calls(stacks: Callable[..., Stack], tmp_path: Path) -> None:
    """The guard never sees model spans, so a cost budget does not stop its run: after the one
    mark that reports the budget, later calls are not marked would_block."""
    path = tmp_path / "cost.yaml"
    path.write_text("version: cost-1\nbudget:\n  max_cost_usd: 1.0\nprices:\n  '*': {input: 100000, output: 100000}\n")
    stack = stacks(policy=str(path))
    chat = dict(captured("genai_chat")["attributes"], **{"gen_ai.usage.input_tokens": 10_000})
    with stack.tracer.start_as_current_span("agent"):
        for n in range(4):
            emit(stack.tracer, captured("genai_chat"), attributes=chat)
            emit(stack.tracer, {"name": "execute_tool lookup_order", "status": "OK"},
                 attributes=_genai_call({"n": n}, args=json.dumps({"order_id": f"A-{n}"})))
    marked = [[e["loopguard.finding.kind"] for e in decisions(s) if e["loopguard.decision"] == "would_block"]
              for s in stack.tool_spans()]
    assert marked == [["budget"], [], [], []]


DIFFERENTIAL_POLICY = """
version: diff-1
repeat: {mode: consecutive, warn_at: 2, stop_at: 3}
cycle: {warn_at: 2, stop_at: 3}
error_streak: {warn_at: 2, stop_at: 3}
no_progress: {warn_at: 3, stop_at: 5}
budget: {max_turns: null, max_tool_calls: 12, max_seconds: null}
tools:
  a: {max_calls: 4}
  p:
    exempt_repeat: true
    poll: {max_polls: 3}
  w:
    side_effect: true
    idempotency_key: key
"""


@pytest.mark.parametrize("seed", range(40))
def test_would_block_marks_the_calls_an_enforcing_guard_denies(stacks: Callable[..., Stack], tmp_path: Path,
                                                              seed: int) -> None:
    """Differential: random runs (caps, polls, writes, errors, repeats, cycles) through an
    observe-only processor and through an enforcing guard. A call's result and failure depend
    on the call only, so the guard's assumption (a repeated call brings nothing new) holds and
    the two must mark exactly the same calls."""
    import random

    from otel_loopguard.enforce import make_guard

    path = tmp_path / "policy.yaml"
    path.write_text(DIFFERENTIAL_POLICY)
    rnd = random.Random(seed)
    calls = []
    for _ in range(14):
        tool = rnd.choice("abcpw")
        args = {"x": rnd.randint(0, 1), **({"key": rnd.choice(["k1", "k2"])} if tool == "w" else {})}
        calls.append((tool, args, {"r": f"{tool}{args['x']}"}, random.Random(f"{seed}{tool}{args['x']}").random() < 0.3))
    stack = stacks(policy=str(path))
    with stack.tracer.start_as_current_span("agent"):
        for tool, args, result, failed in calls:
            attrs = dict(captured("genai_tool")["attributes"], **{
                "gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": json.dumps(args),
                "gen_ai.tool.call.result": json.dumps(result)})
            emit(stack.tracer, {"name": f"execute_tool {tool}", "status": "ERROR" if failed else "OK",
                                "description": "failed"}, attributes=attrs)
    marked = [i for i, s in enumerate(stack.tool_spans()) if any(e["loopguard.decision"] == "would_block"
                                                                  for e in decisions(s))]
    guard = make_guard(key=b"decisions-test-key-0123", policy=str(path))
    denied = []
    for i, (tool, args, result, failed) in enumerate(calls):
        decision = guard.check(tool, args, run_id="r")
        if decision.denied:
            denied.append(i)
        else:
            guard.record(decision, result, not failed, run_id="r")
    assert marked == denied


TURNS_POLICY = """
version: diff-turns-1
repeat: {warn_at: 2, stop_at: 3}
budget: {max_turns: 4, max_tool_calls: null, max_seconds: null}
tools:
  a: {max_calls: 3}
"""


@pytest.mark.parametrize("seed", range(20))
def test_with_model_spans_and_parallel_calls_the_marks_are_the_enforcing_guards_denials(
        stacks: Callable[..., Stack], tmp_path: Path, seed: int) -> None:
    """Turns from model spans (processor) and from the adapter's turn numbers (guard), with
    parallel siblings: the turn budget's last turn runs whole, the next one is stopped."""
    import random

    from otel_loopguard.enforce import make_guard

    path = tmp_path / "policy.yaml"
    path.write_text(TURNS_POLICY)
    rnd = random.Random(seed)
    turns = [[(rnd.choice("abc"), {"x": rnd.randint(0, 1)}) for _ in range(rnd.choice([1, 1, 2, 3]))]
             for _ in range(rnd.randint(5, 9))]
    stack = stacks(policy=str(path))
    with stack.tracer.start_as_current_span("agent"):
        for turn in turns:
            emit(stack.tracer, captured("genai_chat"))  # the decision that requested the calls
            for tool, args in turn:
                attrs = dict(captured("genai_tool")["attributes"], **{
                    "gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": json.dumps(args),
                    "gen_ai.tool.call.result": json.dumps({"r": f"{tool}{args['x']}"})})
                emit(stack.tracer, {"name": f"execute_tool {tool}", "status": "OK"}, attributes=attrs)
    marked = [i for i, s in enumerate(stack.tool_spans()) if any(e["loopguard.decision"] == "would_block"
                                                                  for e in decisions(s))]
    guard = make_guard(key=b"decisions-test-key-0123", policy=str(path))
    denied, i = [], 0
    for number, turn in enumerate(turns, start=1):
        for tool, args in turn:
            decision = guard.check(tool, args, run_id="r", turn=number)
            if decision.denied:
                denied.append(i)
            else:
                guard.record(decision, {"r": f"{tool}{args['x']}"}, True, run_id="r")
            i += 1
    assert marked == denied
