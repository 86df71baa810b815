"""The score's building blocks one by one: integrity findings in full, the guard trail,
and the release rule's messages (docs/scoring.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from otel_loopguard.calls import LOCAL_KEY, GuardEvent, ModelCall
from otel_loopguard.findings import Finding
from otel_loopguard.policy import policy_from_mapping
from otel_loopguard.score import RunInput, check
from otel_loopguard.score.release import release_violations
from otel_loopguard.score.scoring import GuardTrail, judge, next_seq_after

from score_helpers import fingerprinter, raw

NO_BUDGETS = {"max_turns": None, "max_tool_calls": None, "max_seconds": None}


def full(f: Finding) -> tuple:
    return (f.kind, f.severity, f.first_seq, f.last_seq, f.count, f.seqs, f.span_ids, f.tool, f.reason)


# --- integrity findings, every field ----------------------------------------------------------


def test_a_duplicate_is_named_by_its_span_id_or_else_its_call_id() -> None:
    (dup,) = check([raw(1, span_id="s1"), raw(1, span_id="s1")]).findings
    assert full(dup) == ("telemetry_duplicate", "info", 1, 1, 1, (1,), ("s1",), "lookup_order",
                         "call 1 (s1) was delivered more than once; counted once (a telemetry retry, not a repeated call)")
    (dup,) = check([raw(1), raw(1)]).findings
    assert dup.reason.startswith("call 1 (c1) was delivered more than once")


def test_a_redelivery_that_gained_a_span_id_is_the_same_call() -> None:
    for first, second in ((raw(1), raw(1, span_id="s1")), (raw(1, span_id="s1"), raw(1))):
        result = check([first, second])
        assert (result.outcome, [f.kind for f in result.findings]) == ("scored", ["telemetry_duplicate"])
    # Negative control: two different span ids on one call id are two records in conflict.
    assert check([raw(1, span_id="s1"), raw(1, span_id="s2")]).outcome == "integrity_error"


def test_conflicting_records_are_a_warning_naming_both() -> None:
    (conflict,) = check([raw(1, span_id="s1"), raw(1, span_id="s1", result={"other": 1})]).findings
    assert full(conflict)[:8] == ("integrity_conflict", "warn", 1, 1, 2, (1, 1), ("s1", "s1"), "lookup_order")


def test_two_calls_claiming_one_sequence_number() -> None:
    (conflict,) = check([raw(2, "a", call_id="x"), raw(2, "b", call_id="y")]).findings
    assert full(conflict) == ("integrity_conflict", "warn", 2, 2, 2, (2, 2), (None, None), None,
                              "two different calls claim sequence 2: the dispatch order is unknown")


def test_digests_under_two_key_ids_name_both_on_the_first_call() -> None:
    (conflict,) = check([raw(1, key_id="k1"), raw(2, key_id="k2")]).findings
    assert full(conflict) == ("integrity_conflict", "warn", 1, 1, 1, (1,), (None,), "lookup_order",
                              "digests under different key ids (k1, k2) cannot be compared")


def test_missing_calls_are_listed_up_to_ten() -> None:
    (one,) = check([raw(1), raw(3)], dense=True).findings
    assert full(one) == ("incomplete_trace", "warn", 2, 2, 1, (), (), None,
                         "1 call missing from the trace (2): progress cannot be judged")
    (two,) = check([raw(1), raw(4)], dense=True).findings
    assert two.reason == "2 calls missing from the trace (2, 3): progress cannot be judged"
    (ten,) = check([raw(1), raw(12)], dense=True).findings
    assert ten.reason == "10 calls missing from the trace (2, 3, 4, 5, 6, 7, 8, 9, 10, 11): progress cannot be judged"
    (many,) = check([raw(1), raw(13)], dense=True).findings
    assert many.reason.endswith("(2, 3, 4, 5, 6, 7, 8, 9, 10, 11 ...): progress cannot be judged")


def test_unfinished_calls_are_listed_up_to_ten() -> None:
    calls = [raw(s, "read", {"i": s}, span_id=f"s{s}", finished=s > 1) for s in range(1, 4)]
    (unfinished,) = check(calls).findings
    assert full(unfinished) == ("incomplete_trace", "warn", 1, 1, 1, (1,), ("s1",), "read",
                                "calls 1 started but never finished: their results are unknown")
    calls = [raw(s, "read", {"i": s}, finished=False) for s in range(1, 13)]
    (unfinished,) = check(calls).findings
    assert unfinished.reason == "calls 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 started but never finished: their results are unknown"
    assert unfinished.count == 12


# --- the guard trail -------------------------------------------------------------------------


def test_the_earliest_guard_event_wins_and_a_tie_keeps_the_first() -> None:
    trail = GuardTrail()
    trail.note_event(3.5, None, False, 2)
    assert (trail.seq, trail.kind, trail.dispatched, trail.executed_after) == (3.5, "repeat", False, 2)
    trail.note_event(5.5, "budget", False, 0)  # later: ignored (and counts no more than the earliest)
    assert (trail.seq, trail.kind, trail.dispatched, trail.executed_after) == (3.5, "repeat", False, 2)
    # The same place: the first decision stays; the calls run after are the most any counted (a
    # cap's decision counts only its tool's calls, so a run-level one at its place may count more).
    trail.note_event(3.5, "cycle", False, 7)
    assert (trail.seq, trail.kind, trail.dispatched, trail.executed_after) == (3.5, "repeat", False, 7)
    trail.note_event(1.5, "cycle", False, 4)  # earlier: replaces the decision, keeps the count
    assert (trail.seq, trail.kind, trail.dispatched, trail.executed_after) == (1.5, "cycle", False, 7)
    # An observe-mode record (the call was dispatched: would_block) is no decision at all.
    trail.note_event(0.5, "cycle", True, 9)
    assert (trail.seq, trail.kind, trail.dispatched, trail.executed_after) == (1.5, "cycle", False, 7)


def _scored(calls: list, events: list[GuardEvent] = (), policy: Any = None, **run: Any) -> dict:
    fp = fingerprinter(policy_from_mapping(policy or {"budget": NO_BUDGETS}))
    report = judge(RunInput("r", calls, guard_events=list(events), **run), fp)
    assert report.outcome == "scored" and report.score["scorable"] is True
    return report.score


def test_only_dispatched_calls_after_the_guard_count_as_executed_after_it() -> None:
    denied = [raw(1, "a", {"i": 1}), raw(2, "a", {"i": 2}, dispatched=False, ok=False, guard="repeat"),
              raw(3, "a", {"i": 3}, dispatched=False, ok=False, guard="repeat")]
    assert _scored(denied)["executed_after_guard"] is False
    # A guard that acted on a call already dispatched: that call is not "after" it.
    late = [raw(1, "a", {"i": 1}), raw(2, "a", {"i": 2}, guard="repeat")]
    s = _scored(late)
    assert (s["guard_fired"], s["guard_before_dispatch"], s["executed_after_guard"]) == (True, False, False)


def test_a_side_effect_after_the_guard_is_not_forgotten_by_a_later_plain_call() -> None:
    policy = {"budget": NO_BUDGETS, "tools": {"send": {"side_effect": True}}}
    calls = [raw(1, "a", {"i": 1}, dispatched=False, ok=False, guard="repeat"),
             raw(2, "send", {"i": 2}), raw(3, "a", {"i": 3})]
    assert _scored(calls, policy=policy)["side_effect_after_guard"] is True
    # Negative control: plain calls only.
    calls[1] = raw(2, "a", {"i": 2})
    assert _scored(calls, policy=policy)["side_effect_after_guard"] is False


def test_a_denied_record_without_a_kind_is_a_loop_stop() -> None:
    calls = [raw(1, "a", {"i": 1}), raw(2, "a", {"i": 2}, dispatched=False, ok=False, guard=None)]
    assert _scored(calls)["repeat_threshold_crossed"] is True


def test_two_guard_events_at_one_place_keep_their_recorded_order() -> None:
    sec, t0 = 1_000_000_000, 1_700_000_000 * 1_000_000_000
    calls = [raw(s, "read", {"i": s}, start_ns=t0 + s * sec) for s in (1, 2)]
    events = [GuardEvent(time_ns=t0 + 2 * sec + 1, kind="budget", dispatched=False, tool="zz"),
              GuardEvent(time_ns=t0 + 2 * sec + 1, kind="cycle", dispatched=False, tool="aa")]
    assert _scored(calls, events)["repeat_threshold_crossed"] is False  # the first event is the budget's


def test_a_guard_event_at_a_calls_start_time_comes_after_that_call() -> None:
    sec, t0 = 1_000_000_000, 1_700_000_000 * 1_000_000_000
    calls = [raw(s, "read", {"i": s}, start_ns=t0 + s * sec) for s in (1, 2, 3)]
    assert _scored(calls, [GuardEvent(time_ns=t0 + 2 * sec, kind="repeat", dispatched=False, tool="read")])["guard_seq"] == 3


def test_a_guard_right_after_a_stop_on_the_last_call_is_in_time() -> None:
    sec, t0 = 1_000_000_000, 1_700_000_000 * 1_000_000_000
    policy = {"budget": NO_BUDGETS, "error_streak": {"warn_at": 2, "stop_at": 3}}  # due at the next call
    calls = [raw(s, "read", {"i": s}, {"error": "bad"}, ok=False, start_ns=t0 + s * sec) for s in (10, 20, 30)]
    score = _scored(calls, [GuardEvent(time_ns=t0 + 31 * sec, kind="error_streak", dispatched=False,
                                                     tool="read")], policy=policy)
    assert score["guard_seq"] == 31 and score["first_stop_seq"] == 30
    assert not any(v.startswith("guard_too_late") for v in score["release"]["violations"])


def test_the_first_model_calls_cost_counts() -> None:
    policy = {"budget": {**NO_BUDGETS, "max_cost_usd": 1.0}, "prices": {"m": {"input": 1.0, "output": 0.0}}}
    fp = fingerprinter(policy_from_mapping(policy))
    report = judge(RunInput("r", [raw(1, "read", {"i": 1}, turn=1)], models=[ModelCall(turn=1, input_tokens=2_000_000, model="m")]), fp)
    assert [(f.kind, f.severity) for f in report.findings] == [("budget", "stop")]


def test_findings_carry_the_run_id() -> None:
    policy = policy_from_mapping({"budget": NO_BUDGETS, "repeat": {"warn_at": 2, "stop_at": 3}})
    report = judge(RunInput("run-77", [raw(s, "read", {"i": 1}, {"same": 1}) for s in (1, 2)]), fingerprinter(policy))
    assert [(f.kind, f.run_id) for f in report.findings] == [("repeat", "run-77")]


# --- release rule messages --------------------------------------------------------------------


def _score(**over: Any) -> dict:
    base = {"guard_fired": False, "guard_before_dispatch": None, "executed_after_guard": False,
            "duplicate_writes": 0, "side_effect_after_guard": False, "first_stop_seq": None, "guard_seq": None,
            "termination_reason": None, "poll_budget_exhausted": False, "terminal_response_emitted": None}
    return {**base, **over}


def _stop(kind: str, seq: int) -> Finding:
    return Finding(kind=kind, severity="stop", first_seq=seq, last_seq=seq, count=1, seqs=(seq,), span_ids=(f"s{seq}",),
                   reason=f"{kind} stop", tool="t")


def test_uncontained_loop_names_every_kind_once_in_order() -> None:
    stops = [_stop("repeat", 3), _stop("cycle", 4), _stop("repeat", 5)]
    assert release_violations(_score(first_stop_seq=3), stops) == [
        "uncontained_loop: stop-level findings (cycle, repeat) with no guard denying the next call"]


def test_by_default_the_guard_is_due_at_the_call_after_an_at_next_call_stop() -> None:
    guarded = dict(guard_fired=True, guard_before_dispatch=True, first_stop_seq=3, terminal_response_emitted=True)
    assert release_violations(_score(**guarded, guard_seq=4), [_stop("error_streak", 3)]) == []
    assert release_violations(_score(**guarded, guard_seq=5), [_stop("error_streak", 3)]) == [
        "guard_too_late: the stop threshold was crossed at call 3, but the guard first acted at call 5"]


def test_executed_after_guard_message() -> None:
    s = _score(guard_fired=True, guard_before_dispatch=True, executed_after_guard=True, guard_seq=2,
               terminal_response_emitted=True)
    assert release_violations(s, []) == ["executed_after_guard: a call was dispatched after the guard denied one"]


def test_an_exhausted_poll_budget_needs_a_deadline_or_guard_ending() -> None:
    for reason, broken in (("deadline", False), ("loop_guard", False), ("turn_limit", True), (None, True)):
        v = release_violations(_score(poll_budget_exhausted=True, termination_reason=reason), [])
        assert (v == ["poll_without_terminal: polling ran out of budget without a deadline or guard response"]) is broken


def test_digests_computed_here_carry_the_fingerprinters_key_id() -> None:
    """A call with raw arguments is digested under our key: beside a call tagged under another
    key id the run cannot be compared, beside one tagged under ours it can."""
    fp = fingerprinter(policy_from_mapping({"budget": NO_BUDGETS}))
    ours, theirs = raw(1, "read", {"i": 1}, key_id=LOCAL_KEY), raw(2, "read", {"i": 2})
    assert judge(RunInput("r", [ours, replace(theirs, key_id="other-key")]), fp).outcome == "integrity_error"
    assert judge(RunInput("r", [ours, replace(theirs, key_id=fp.key_id)]), fp).outcome == "scored"


def test_the_call_after_the_last_is_the_next_number() -> None:
    after = next_seq_after([10, 20, 30])
    assert (after(10), after(25), after(30)) == (20, 30, 31)
