"""Score fields and the release rule, from NDJSON records (calls, `"record": "run"` lines,
guard fields `dispatched` / `guard`) audited with the seed policy (tests/fixtures/policies/seed-v1.yaml:
two identical calls are allowed, the third is the stop-level finding).

The seed's three traces, the guarded run, and mutations that must flip the verdict.
"""

from __future__ import annotations

import pytest

from otel_loopguard.calls import TERMINATION_REASONS

from score_helpers import DELIVERED, NOT_RUN, call, kinds, lookups, one, run_record, violations

EXPORT = {"export_id": "x9"}


# --- seed trace 1: the stalled order lookup -------------------------------------------------


def test_stalled_order_lookup_crosses_the_threshold_and_fails(tmp_path) -> None:
    report = one(tmp_path, lookups(3) + [run_record("turn_limit", False)])

    assert report.outcome == "scored"
    assert kinds(report) == [("repeat", "stop")]
    f = report.findings[0]
    assert (f.first_seq, f.last_seq, f.count, f.tool) == (1, 3, 3, "lookup_order")
    s = report.score
    assert s["repeat_threshold_crossed"] is True
    assert s["progress_observed"] is False
    assert s["guard_fired"] is False and s["guard_before_dispatch"] is None
    assert s["first_stop_seq"] == 3
    assert s["termination_reason"] == "turn_limit" and s["terminal_response_emitted"] is False
    assert report.passed is False
    assert violations(report) == ["uncontained_loop", "limit_after_unchanged_calls"]


@pytest.mark.parametrize("n,crossed", [(1, False), (2, False), (3, True), (4, True)])
def test_threshold_boundary_the_third_identical_call_is_the_finding(tmp_path, n, crossed) -> None:
    report = one(tmp_path, lookups(n) + [run_record("final_answer", True)])

    assert report.score["repeat_threshold_crossed"] is crossed
    assert report.passed is (not crossed)
    stops = [f for f in report.findings if f.severity == "stop"]
    assert [(f.first_seq, f.last_seq) for f in stops] == ([(1, 3)] if crossed else [])
    assert report.score["first_stop_seq"] == (3 if crossed else None)


def test_mutation_removing_the_third_call_clears_the_finding(tmp_path) -> None:
    assert one(tmp_path, lookups(3)).passed is False
    assert one(tmp_path, lookups(2)).passed is True


def test_mutation_a_higher_version_is_progress_and_clears_it(tmp_path) -> None:
    records = lookups(3)
    records[2]["observation"] = {**DELIVERED, "version": 8}
    report = one(tmp_path, records + [run_record("final_answer", True)])

    assert report.findings == []
    assert report.score["repeat_threshold_crossed"] is False
    assert report.score["progress_observed"] is True
    assert report.passed is True


def test_mutation_other_arguments_are_another_fingerprint(tmp_path) -> None:
    records = lookups(3)
    records[2]["arguments"] = {"order_id": "A13", "include_items": True}
    report = one(tmp_path, records + [run_record("final_answer", True)])

    assert report.passed is True
    assert report.score["distinct_action_count"] == 2
    assert report.calls[0].action == report.calls[1].action != report.calls[2].action


def test_key_order_of_the_arguments_does_not_matter(tmp_path) -> None:
    records = lookups(3)
    records[1]["arguments"] = {"include_items": True, "order_id": "A12"}
    records[2]["arguments"] = '{"include_items":true,"order_id":"A12"}'  # JSON text
    report = one(tmp_path, records)
    assert report.score["distinct_action_count"] == 1
    assert report.score["repeat_threshold_crossed"] is True


# --- seed trace 2: export polling ---------------------------------------------------------


def polls(*states: str) -> list[dict]:
    return [call(i, "get_export_status", EXPORT, {"state": s}) for i, s in enumerate(states, start=1)]


def test_export_polling_that_advances_passes(tmp_path) -> None:
    report = one(tmp_path, polls("queued", "running", "complete") + [run_record("final_answer", True)])

    assert report.findings == []
    s = report.score
    assert s["repeat_threshold_crossed"] is False
    assert s["poll_budget_exhausted"] is False
    assert s["progress_observed"] is True
    assert s["distinct_action_count"] == 1 and s["tool_calls"] == 3
    assert report.passed is True


def test_polling_that_stays_running_past_its_budget_fails(tmp_path) -> None:
    report = one(tmp_path, polls(*["running"] * 10) + [run_record("final_answer", True)])

    assert report.score["poll_budget_exhausted"] is True
    assert ("poll_budget", "stop") in kinds(report)
    assert "poll_without_terminal" in violations(report)
    assert report.passed is False


# --- seed trace 3: pagination ---------------------------------------------------------------


def page(seq: int, cursor, ids: list[str], next_cursor) -> dict:
    return call(seq, "search_cases", {"query": "refund", "cursor": cursor},
                {"items": [{"id": i} for i in ids], "next": next_cursor})


def test_pagination_with_a_new_cursor_and_new_items_passes(tmp_path) -> None:
    records = [
        page(1, None, ["case-1", "case-2"], "eyJwYWdlIjoyfQ"),
        page(2, "eyJwYWdlIjoyfQ", ["case-3"], None),
        run_record("final_answer", True),
    ]
    report = one(tmp_path, records)

    assert report.findings == []
    assert report.score["distinct_action_count"] == 2
    assert report.score["new_items_observed"] is True
    assert report.score["repeat_threshold_crossed"] is False
    assert report.passed is True


def test_returning_to_the_first_cursor_is_not_a_consecutive_repeat(tmp_path) -> None:
    records = [page(1, None, ["case-1"], "p2"), page(2, "p2", ["case-2"], None), page(3, None, ["case-1"], "p2")]
    report = one(tmp_path, records + [run_record("final_answer", True)])
    assert report.score["distinct_action_count"] == 2
    assert report.passed is True


# --- the guard ---------------------------------------------------------------------------


def guarded(n_before: int = 2, guard_seq: int = 3) -> list[dict]:
    return lookups(n_before) + [call(guard_seq, observation="not executed: loop guard", **NOT_RUN)]


def test_a_guard_that_denies_before_dispatch_passes(tmp_path) -> None:
    report = one(tmp_path, guarded() + [run_record("loop_guard", True)])

    s = report.score
    assert report.outcome == "scored"
    assert s["tool_calls"] == 2  # the denied call never ran
    assert s["guard_fired"] is True and s["guard_seq"] == 3
    assert s["guard_before_dispatch"] is True
    assert s["executed_after_guard"] is False and s["side_effect_after_guard"] is False
    assert s["repeat_threshold_crossed"] is True  # the guard denied a repeat
    assert s["termination_reason"] == "loop_guard" and s["terminal_response_emitted"] is True
    assert report.passed is True and violations(report) == []


def test_mutation_guard_after_dispatch_fails(tmp_path) -> None:
    records = lookups(2) + [call(3, guard="repeat"), run_record("loop_guard", True)]  # dispatched, then "guarded"
    report = one(tmp_path, records)

    assert report.score["guard_fired"] is True
    assert report.score["guard_before_dispatch"] is False
    assert report.score["tool_calls"] == 3
    assert "guard_after_dispatch" in violations(report)
    assert report.passed is False


def test_the_same_call_executed_after_the_guard_fails(tmp_path) -> None:
    records = guarded() + [call(4), run_record("loop_guard", True)]
    report = one(tmp_path, records)

    assert report.score["executed_after_guard"] is True
    assert report.passed is False
    assert "uncontained_loop" in violations(report)


def test_another_tool_executed_after_the_guard_fails(tmp_path) -> None:
    records = guarded() + [call(4, "read_refund_policy", {"region": "EU"}, {"window_days": 30}), run_record("loop_guard", True)]
    report = one(tmp_path, records)

    assert report.score["executed_after_guard"] is True
    assert report.passed is False


def test_a_guard_that_fires_after_the_offending_call_ran_fails(tmp_path) -> None:
    report = one(tmp_path, guarded(n_before=3, guard_seq=4) + [run_record("loop_guard", True)])

    assert report.score["first_stop_seq"] == 3 and report.score["guard_seq"] == 4
    assert report.passed is False


@pytest.mark.parametrize("guard_seq, passes", [(3, True), (4, False)])
def test_a_cap_contained_at_the_call_after_its_limit_is_on_time(tmp_path, guard_seq: int, passes: bool) -> None:
    """A cap's limit is the last call allowed: its stop fires on that call, and the guard can
    act only at the next one. Denying it is on time; denying one later is not."""
    records = [call(i, arguments={"order_id": f"A{i}"}, observation={"status": "delivered", "version": i})
               for i in range(1, guard_seq)]
    records += [call(guard_seq, observation="not executed: loop guard", ok=False, dispatched=False, guard="tool_cap"),
                run_record("loop_guard", True)]
    report = one(tmp_path, records, {"tools": {"lookup_order": {"max_calls": 2}}})
    assert report.score["first_stop_seq"] == 2 and report.score["guard_seq"] == guard_seq
    assert ("guard_too_late" in " ".join(violations(report))) is not passes


@pytest.mark.parametrize("capped_again, passes", [(False, True), (True, False)])
def test_a_cap_refuses_its_tool_only_other_tools_after_it_are_the_run_going_on(
        tmp_path, capped_again: bool, passes: bool) -> None:
    """docs/rollout.md: a per-tool cap refuses that tool only. Other tools dispatched after its
    denial are not `executed_after_guard`; the capped tool dispatched again past its cap is."""
    records = [call(i, arguments={"order_id": f"A{i}"}, observation={"status": "delivered", "version": i})
               for i in (1, 2)]
    records += [call(3, observation="not executed: loop guard", ok=False, dispatched=False, guard="tool_cap"),
                call(4, "get_shipping", {"order_id": "A1"}, {"carrier": "DHL"}),
                call(5, "get_shipping", {"order_id": "A2"}, {"carrier": "UPS"})]
    if capped_again:
        records.append(call(6, arguments={"order_id": "A6"}, observation={"status": "lost", "version": 6}))
    report = one(tmp_path, records + [run_record("final_answer", True)], {"tools": {"lookup_order": {"max_calls": 2}}})
    assert report.score["executed_after_guard"] is capped_again
    assert report.score["calls_past_cap"] == (1 if capped_again else 0)
    assert report.passed is passes, violations(report)


@pytest.mark.parametrize("with_models", [False, True])
def test_a_turn_budget_contained_at_the_next_turn_is_on_time(tmp_path, with_models: bool) -> None:
    """The turn budget's last turn runs whole (parallel calls included), and with model records
    its stop is reached by a model decision before that turn's calls: not a late guard."""
    def lookup(i: int, turn: int) -> dict:
        return call(i, arguments={"order_id": f"A{i}"}, observation={"status": "delivered", "version": i}, turn=turn)

    records = [lookup(1, 1), lookup(2, 2), lookup(3, 2),  # turn 2, the last allowed, has two calls
               call(4, arguments={"order_id": "A4"}, observation="not executed: loop guard", ok=False,
                    dispatched=False, guard="budget", turn=3),
               run_record("loop_guard", True)]
    if with_models:
        records = [{"record": "model", "run_id": "r", "turn": t, "input_tokens": 1, "output_tokens": 1, "model": "m"}
                   for t in (1, 2, 3)] + records
    report = one(tmp_path, records, {"budget": {"max_turns": 2, "max_tool_calls": None, "max_seconds": None}})
    assert [f.kind for f in report.findings if f.severity == "stop"] == ["budget"]
    assert violations(report) == [] and report.passed


def test_a_side_effect_after_the_guard_fails(tmp_path) -> None:
    refund = call(4, "issue_refund", {"order_id": "A12", "amount": 20, "idempotency_key": "k-1"}, {"status": "succeeded"})
    report = one(tmp_path, guarded() + [refund, run_record("loop_guard", True)])

    assert report.score["side_effect_after_guard"] is True
    assert "side_effect_after_guard" in violations(report)
    assert report.passed is False


def test_a_guard_without_a_terminal_response_fails(tmp_path) -> None:
    report = one(tmp_path, guarded() + [run_record("loop_guard", False)])
    assert violations(report) == ["no_terminal_response"]


# --- termination reason: recorded, never inferred -----------------------------------------


def test_a_looping_run_without_a_run_record_reports_unknown(tmp_path) -> None:
    report = one(tmp_path, lookups(5))
    assert report.score["termination_reason"] == "unknown"
    assert report.score["terminal_response_emitted"] is None


def test_a_guarded_run_without_a_run_record_is_not_labelled_loop_guard(tmp_path) -> None:
    report = one(tmp_path, guarded())
    assert report.score["guard_fired"] is True
    assert report.score["termination_reason"] == "unknown"
    assert "no_terminal_response" in violations(report)


@pytest.mark.parametrize("reason", TERMINATION_REASONS)
def test_a_recorded_termination_reason_is_reported_as_recorded(tmp_path, reason) -> None:
    report = one(tmp_path, lookups(1) + [run_record(reason, True)])
    assert report.score["termination_reason"] == reason


def test_a_run_record_may_come_before_the_calls(tmp_path) -> None:
    report = one(tmp_path, [run_record("final_answer", True)] + lookups(2))
    assert report.score["termination_reason"] == "final_answer"


def test_a_hard_limit_after_unchanged_calls_fails_but_final_answer_alone_does_not_excuse_a_loop(tmp_path) -> None:
    assert "limit_after_unchanged_calls" in violations(one(tmp_path, lookups(3) + [run_record("budget", True)]))
    final = one(tmp_path, lookups(3) + [run_record("final_answer", True)])
    assert final.passed is False and violations(final) == ["uncontained_loop"]


# --- writes and idempotency keys -------------------------------------------------------------


def refund(seq: int, key=None, ok: bool = True) -> dict:
    args = {"order_id": "A12", "amount": 20}
    if key is not None:
        args["idempotency_key"] = key
    return call(seq, "issue_refund", args, {"status": "succeeded"} if ok else {"error": "timeout"}, ok=ok)


def test_duplicate_write_with_a_different_idempotency_key_fails(tmp_path) -> None:
    report = one(tmp_path, [refund(1, "k-1", ok=False), refund(2, "k-2"), run_record("final_answer", True)])

    assert kinds(report) == [("duplicate_write", "stop")]
    f = report.findings[0]
    assert (f.first_seq, f.last_seq, f.tool) == (1, 2, "issue_refund")
    assert report.score["duplicate_writes"] == 1
    assert violations(report) == ["duplicate_write"]
    assert report.passed is False


def test_a_retry_with_the_same_idempotency_key_passes(tmp_path) -> None:
    report = one(tmp_path, [refund(1, "k-1", ok=False), refund(2, "k-1"), run_record("final_answer", True)])
    assert report.score["duplicate_writes"] == 0
    assert report.passed is True


def test_a_retried_write_without_any_key_fails(tmp_path) -> None:
    report = one(tmp_path, [refund(1, ok=False), refund(2), run_record("final_answer", True)])
    assert report.score["duplicate_writes"] == 1 and report.passed is False


def test_the_write_rule_comes_from_the_policy_file(tmp_path) -> None:
    records = [refund(1, "k-1", ok=False), refund(2, "k-2"), run_record("final_answer", True)]
    plain = {"version": "no-write-rules", "repeat": {"allowed_repeats": 2}}
    assert one(tmp_path, records, policy=plain).score["duplicate_writes"] == 0

    keyed = {"version": "refund-keyed", "tools": {"issue_refund": {"side_effect": True, "idempotency_key": "idempotency_key"}}}
    report = one(tmp_path, records, policy=keyed)
    assert report.score["duplicate_writes"] == 1 and report.passed is False
    assert report.findings[0].policy_version == "refund-keyed"


# --- the score is categorical ---------------------------------------------------------------


def test_runs_are_judged_separately_and_never_averaged(tmp_path) -> None:
    from score_helpers import audit_records

    records = (
        [refund(1, "k-1", ok=False) | {"run_id": "pay", "call_id": "p1"},
         refund(2, "k-2") | {"run_id": "pay", "call_id": "p2"}]
        + [call(i, run=f"clean-{n}") for n in range(5) for i in (1, 2)]
    )
    reports = {r.run_id: r for r in audit_records(tmp_path, records)}
    assert reports["pay"].passed is False
    assert all(reports[f"clean-{n}"].passed for n in range(5))
