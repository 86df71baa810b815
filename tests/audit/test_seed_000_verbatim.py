"""Seed 000's traces, boundary cases and mutations, through `otel-loopguard audit` with the
article's own numbers: sequences 10, 20, 30 order the calls as the runtime dispatched them,
so they are three calls in a row, not a trace missing 27 calls (docs/findings.md).

Policies say what the article's oracle is given: `allowed_repeats` identical calls pass,
and the progress rule is the declared business version (`status_advanced`) or none at all
(`lambda _a, _b: False`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from audit_helpers import SEED_POLICY, findings_of, only_run, write_ndjson

A12 = {"order_id": "A12"}


def lookup(sequence: int, arguments: dict, status: str, version: int, run: str = "seed", **extra: Any) -> dict:
    """The article's `call(sequence, arguments, status, version)` as an NDJSON record."""
    return {"run_id": run, "sequence": sequence, "call_id": f"{run}-{sequence}", "tool": "lookup_order",
            "arguments": arguments, "observation": {"status": status, "version": version}, **extra}


def policy(tmp_path: Path, allowed_repeats: int, version_progress: bool) -> Path:
    data: dict[str, Any] = {"version": f"seed-000-{allowed_repeats}", "repeat": {"allowed_repeats": allowed_repeats}}
    if version_progress:  # status_advanced: a higher integer version is progress
        data["tools"] = {"lookup_order": {"progress": {"version_field": "version"}}}
    path = tmp_path / f"seed-000-{allowed_repeats}-{version_progress}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def audited(audit_fast, tmp_path: Path, records: list[dict], pol: Optional[Path]) -> tuple[int, dict]:
    code, doc = audit_fast.json(write_ndjson(tmp_path / "seed.ndjson", records), policy=pol)
    return code, only_run(doc)


STALLED = [lookup(10, A12, "delivered", 7), lookup(20, A12, "delivered", 7), lookup(30, A12, "delivered", 7)]


# --- the article's three oracle tests --------------------------------------------------------


def test_flags_the_third_unchanged_lookup_at_10_to_30(audit_fast, tmp_path: Path) -> None:
    code, run = audited(audit_fast, tmp_path, STALLED, policy(tmp_path, 2, True))
    assert run["outcome"] == "scored"  # 10, 20, 30 is no trace with 27 calls missing
    assert findings_of(run) == [("repeat", "stop", 10, 30, 3, "lookup_order")]
    assert code == 1  # nothing contained it


def test_allows_same_request_when_the_resource_version_advances(audit_fast, tmp_path: Path) -> None:
    calls = [lookup(10, A12, "pending", 7), lookup(20, A12, "pending", 8), lookup(30, A12, "delivered", 9)]
    code, run = audited(audit_fast, tmp_path, calls, policy(tmp_path, 2, True))
    assert (run["outcome"], findings_of(run), code) == ("scored", [], 0)


@pytest.mark.parametrize("cursor", ["page-2", "page-3"])
def test_different_pagination_cursor_is_a_different_action(audit_fast, tmp_path: Path, cursor: str) -> None:
    calls = [lookup(10, {"query": "refund", "cursor": None}, "ok", 1),
             lookup(20, {"query": "refund", "cursor": cursor}, "ok", 1),
             lookup(30, {"query": "refund", "cursor": None}, "ok", 1)]
    code, run = audited(audit_fast, tmp_path, calls, policy(tmp_path, 1, False))
    assert [f for f in findings_of(run) if f[0] == "repeat"] == []
    assert run["score"]["distinct_action_count"] == 2
    # Mutation: the third call returns to page-N instead: two identical calls in a row with
    # one allowed, the finding appears, over the article's numbers.
    calls[2] = lookup(30, {"query": "refund", "cursor": cursor}, "ok", 1)
    _, run = audited(audit_fast, tmp_path, calls, policy(tmp_path, 1, False))
    assert [f for f in findings_of(run) if f[0] == "repeat"] == [("repeat", "stop", 20, 30, 2, "lookup_order")]


# --- threshold boundaries: zero to three stalled calls, two allowed --------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_first_blocked_call_is_the_third(audit_fast, tmp_path: Path, n: int) -> None:
    code, run = audited(audit_fast, tmp_path, STALLED[:n], policy(tmp_path, 2, True))
    expected = [("repeat", "stop", 10, 30, 3, "lookup_order")] if n == 3 else []
    assert findings_of(run) == expected
    assert run["score"]["first_stop_seq"] == (30 if n == 3 else None)


def test_zero_calls_is_no_run_to_score(audit_fast, tmp_path: Path) -> None:
    path = write_ndjson(tmp_path / "empty.ndjson", [])
    proc = audit_fast(path, policy=policy(tmp_path, 2, True), fmt="json")
    assert proc.returncode == 3  # nothing scored is never a pass


# --- the article's mutations of the stalled fixture -----------------------------------------


@pytest.mark.parametrize(
    "mutate",
    [
        lambda calls: calls[:2],  # remove the third call
        lambda calls: calls[:2] + [lookup(30, A12, "delivered", 8)],  # only its version 7 -> 8
        lambda calls: calls[:2] + [lookup(30, {"order_id": "A13"}, "delivered", 7)],  # only its arguments
    ],
    ids=["third_call_removed", "version_advanced", "arguments_changed"],
)
def test_each_mutation_clears_the_finding(audit_fast, tmp_path: Path, mutate) -> None:
    _, before = audited(audit_fast, tmp_path, STALLED, policy(tmp_path, 2, True))
    assert findings_of(before) == [("repeat", "stop", 10, 30, 3, "lookup_order")]
    _, after = audited(audit_fast, tmp_path, mutate(list(STALLED)), policy(tmp_path, 2, True))
    assert [f for f in findings_of(after) if f[0] == "repeat"] == []


GUARDED = {"dispatched": False, "guard": "repeat", "ok": False}
ENDED_BY_GUARD = {"record": "run", "run_id": "seed", "termination_reason": "loop_guard", "terminal_response": True}


def test_the_guard_denying_call_30_before_dispatch_passes(audit_fast, tmp_path: Path) -> None:
    calls = STALLED[:2] + [lookup(30, A12, "not executed: loop guard", 0, **GUARDED), ENDED_BY_GUARD]
    code, run = audited(audit_fast, tmp_path, calls, policy(tmp_path, 2, True))
    score = run["score"]
    assert (score["guard_seq"], score["guard_before_dispatch"], score["executed_after_guard"]) == (30, True, False)
    assert code == 0


def test_mutation_guard_event_moved_after_dispatch_fails_the_execution_contract(audit_fast, tmp_path: Path) -> None:
    calls = STALLED[:2] + [lookup(30, A12, "delivered", 7, guard="repeat"), ENDED_BY_GUARD]
    code, run = audited(audit_fast, tmp_path, calls, policy(tmp_path, 2, True))
    assert run["score"]["guard_before_dispatch"] is False
    assert any(v.startswith("guard_after_dispatch") for v in run["score"]["release"]["violations"])
    assert code == 1


def test_a_guard_at_the_call_after_30_is_late_for_a_repeat(audit_fast, tmp_path: Path) -> None:
    calls = STALLED + [lookup(40, A12, "not executed: loop guard", 0, **GUARDED), ENDED_BY_GUARD]
    code, run = audited(audit_fast, tmp_path, calls, policy(tmp_path, 2, True))
    assert any(v.startswith("guard_too_late") for v in run["score"]["release"]["violations"])
    assert code == 1


def test_a_stop_the_guard_acts_on_at_the_next_call_is_on_time_at_the_next_sparse_number(
        audit_fast, tmp_path: Path) -> None:
    # An error streak is known only from the 4th failure's outcome: the guard acts at the
    # next call, which here is number 50, not 41.
    failing = [{**lookup(s, {"order_id": f"X{s}"}, "error", 0), "ok": False} for s in (10, 20, 30, 40)]
    calls = failing + [lookup(50, {"order_id": "X50"}, "not executed: loop guard", 0,
                              **{**GUARDED, "guard": "error_streak"}), ENDED_BY_GUARD]
    code, run = audited(audit_fast, tmp_path, calls, policy(tmp_path, 2, False))
    assert ("error_streak", "stop", 10, 40, 4, "lookup_order") in findings_of(run)
    assert run["score"]["release"]["violations"] == []
    assert code == 0


# --- the article's three traces that look alike ---------------------------------------------


def test_trace_1_stalled_lookup_recorded_after_dispatch(audit_fast, tmp_path: Path) -> None:
    calls = STALLED[:2] + [lookup(30, A12, "delivered", 7, guard="repeat"), ENDED_BY_GUARD]
    _, run = audited(audit_fast, tmp_path, calls, SEED_POLICY)
    score = run["score"]
    assert (score["repeat_threshold_crossed"], score["guard_before_dispatch"], score["termination_reason"]) == (
        True, False, "loop_guard")


def test_trace_2_export_polling_advances_through_its_states(audit_fast, tmp_path: Path) -> None:
    calls = [{"run_id": "seed", "sequence": s, "call_id": f"e{s}", "tool": "get_export_status",
              "arguments": {"export_id": "E1"}, "observation": {"state": state}}
             for s, state in ((10, "queued"), (20, "running"), (30, "complete"))]
    code, run = audited(audit_fast, tmp_path, calls, SEED_POLICY)
    assert run["outcome"] == "scored"
    assert (findings_of(run), run["score"]["poll_budget_exhausted"], code) == ([], False, 0)


def test_trace_3_pagination_with_unseen_case_ids(audit_fast, tmp_path: Path) -> None:
    calls = [{"run_id": "seed", "sequence": 10, "call_id": "s10", "tool": "search_cases",
              "arguments": {"query": "refund", "cursor": None}, "observation": {"items": [{"id": "case-1"}]}},
             {"run_id": "seed", "sequence": 20, "call_id": "s20", "tool": "search_cases",
              "arguments": {"query": "refund", "cursor": "eyJwYWdlIjoyfQ"}, "observation": {"items": [{"id": "case-2"}]}},
             {"record": "run", "run_id": "seed", "termination_reason": "final_answer", "terminal_response": True}]
    code, run = audited(audit_fast, tmp_path, calls, SEED_POLICY)
    assert (run["score"]["distinct_action_count"], run["score"]["new_items_observed"]) == (2, True)
    assert (findings_of(run), code) == ([], 0)


# --- integrity with sparse numbers ------------------------------------------------------------


def test_two_different_calls_claiming_20_are_an_integrity_error(audit_fast, tmp_path: Path) -> None:
    other = {**lookup(20, {"order_id": "B7"}, "delivered", 1), "call_id": "other-20"}
    code, run = audited(audit_fast, tmp_path, STALLED + [other], policy(tmp_path, 2, True))
    assert (run["outcome"], code) == ("integrity_error", 3)


def test_a_redelivered_record_at_20_counts_once(audit_fast, tmp_path: Path) -> None:
    _, run = audited(audit_fast, tmp_path, STALLED[:2] + [STALLED[1]], policy(tmp_path, 2, True))
    assert [f[0] for f in findings_of(run)] == ["telemetry_duplicate"]
    assert run["score"]["tool_calls"] == 2


def test_a_started_call_without_result_is_the_incompleteness(audit_fast, tmp_path: Path) -> None:
    calls = STALLED[:2] + [{**lookup(30, A12, "delivered", 7), "observation": None, "finished": False}]
    code, run = audited(audit_fast, tmp_path, calls, policy(tmp_path, 2, True))
    assert (run["outcome"], code) == ("incomplete_trace", 3)
    assert [(f["first_seq"], f["count"]) for f in run["findings"]] == [(30, 1)]


def test_a_promise_of_dense_numbers_makes_the_same_gaps_missing_calls(audit_fast, tmp_path: Path) -> None:
    dense = {"record": "run", "run_id": "seed", "dense_sequence": True}
    code, run = audited(audit_fast, tmp_path, STALLED + [dense], policy(tmp_path, 2, True))
    assert (run["outcome"], code) == ("incomplete_trace", 3)
    path = write_ndjson(tmp_path / "flag.ndjson", STALLED)
    proc = audit_fast(path, "--dense-seq", policy=policy(tmp_path, 2, True), fmt="json")
    assert proc.returncode == 3 and '"incomplete_trace"' in proc.stdout
