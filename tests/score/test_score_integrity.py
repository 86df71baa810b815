"""Trace integrity before scoring (otel_loopguard.score.check / judge, docs/scoring.md).

Telemetry retries are not loops, conflicting evidence is not trusted, and missing
evidence is never a clean score.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from otel_loopguard.audit import exit_status
from otel_loopguard.score import INCOMPLETE, INTEGRITY_ERROR, SCORED, RunInput, check, judge

from score_helpers import fingerprinter, raw


def summary(findings) -> list[tuple]:
    return [(f.kind, f.severity, f.first_seq, f.last_seq, f.count) for f in findings]


# --- duplicates ---------------------------------------------------------------------------


def test_identical_duplicate_records_are_deduplicated_and_reported_as_info() -> None:
    calls = [raw(1), raw(2), raw(2)]
    result = check(calls)

    assert result.outcome == SCORED
    assert [c.seq for c in result.calls] == [1, 2]
    assert summary(result.findings) == [("telemetry_duplicate", "info", 2, 2, 1)]


@pytest.mark.parametrize(
    "first,again",
    [
        (raw(2, span_id="aa01", call_id=None), raw(2, span_id="aa01", call_id=None)),  # same span id
        (raw(2, call_id="call-2"), raw(2, call_id="call-2")),  # same call id, no span id
        (raw(2, call_id="call-2", span_id="aa01"), raw(2, call_id="call-2")),  # re-delivery lost its span id
    ],
    ids=["span_id", "call_id", "redelivery_without_span_id"],
)
def test_a_redelivered_record_counts_once(first, again) -> None:
    result = check([raw(1), first, again])
    assert result.outcome == SCORED
    assert len(result.calls) == 2
    assert [f.kind for f in result.findings] == ["telemetry_duplicate"]


def test_a_deduplicated_run_is_still_scored_and_the_copy_is_not_a_repeat() -> None:
    # Seed policy allows two identical calls; a third copy of call 2 must not become "three".
    report = judge(RunInput("r", [raw(1), raw(2), raw(2)]), fingerprinter())

    assert report.outcome == SCORED
    assert report.passed is True
    assert [f.kind for f in report.findings] == ["telemetry_duplicate"]
    assert report.score["tool_calls"] == 2
    assert report.score["repeat_threshold_crossed"] is False


def test_many_copies_of_many_calls_in_any_order_score_like_the_clean_run() -> None:
    clean = [raw(i) for i in range(1, 4)]
    noisy = clean + clean + [clean[0]]
    random.Random(7).shuffle(noisy)

    fp = fingerprinter()
    a, b = judge(RunInput("r", clean), fp), judge(RunInput("r", noisy), fp)
    assert [f for f in b.findings if f.kind != "telemetry_duplicate"] == a.findings
    assert sum(f.kind == "telemetry_duplicate" for f in b.findings) == 4
    assert {k: v for k, v in b.score.items() if k != "findings_by_kind"} == {
        k: v for k, v in a.score.items() if k != "findings_by_kind"
    }


# --- conflicts -> integrity_error ---------------------------------------------------------


def test_same_span_id_with_different_content_is_an_integrity_error() -> None:
    calls = [raw(1, span_id="s1"), raw(2, span_id="s2"), raw(2, span_id="s2", call_id="c2", result={"status": "lost"})]
    result = check(calls)

    assert result.outcome == INTEGRITY_ERROR
    conflict = [f for f in result.findings if f.kind == "integrity_conflict"]
    assert len(conflict) == 1 and conflict[0].seqs == (2, 2)
    assert "s2" in conflict[0].reason


def test_same_call_id_with_different_content_is_an_integrity_error() -> None:
    calls = [raw(1), raw(2, call_id="dup"), raw(3, call_id="dup", arguments={"order_id": "B7"})]
    result = check(calls)

    assert result.outcome == INTEGRITY_ERROR
    assert [f.kind for f in result.findings] == ["integrity_conflict"]
    assert "dup" in result.findings[0].reason


def test_two_different_calls_with_one_sequence_number_are_an_integrity_error() -> None:
    calls = [raw(1), raw(2, call_id="a"), raw(2, call_id="b", tool="read_refund_policy", arguments={})]
    result = check(calls)

    assert result.outcome == INTEGRITY_ERROR
    assert summary(result.findings) == [("integrity_conflict", "warn", 2, 2, 2)]


def test_different_key_ids_in_one_run_are_an_integrity_error() -> None:
    calls = [raw(1, key_id="key-2024"), raw(2, key_id="key-2025"), raw(3, key_id="key-2025")]
    result = check(calls)

    assert result.outcome == INTEGRITY_ERROR
    assert [f.kind for f in result.findings] == ["integrity_conflict"]
    assert "key-2024" in result.findings[0].reason and "key-2025" in result.findings[0].reason


def test_one_key_id_or_none_is_fine() -> None:
    assert check([raw(1, key_id="k"), raw(2, key_id="k")]).outcome == SCORED
    assert check([raw(1), raw(2)]).outcome == SCORED


def test_a_conflict_outranks_a_gap() -> None:
    calls = [raw(1, call_id="x"), raw(2, call_id="x", result={"status": "lost"}), raw(5)]
    result = check(calls, dense=True)
    assert result.outcome == INTEGRITY_ERROR


# --- missing evidence -> incomplete_trace ---------------------------------------------------


# A gap is missing evidence only where the numbering is promised dense (the caller's say-so
# here, the processor's mark on spans): elsewhere a sequence only orders calls.


def test_a_gap_is_an_incomplete_trace_naming_the_missing_call() -> None:
    result = check([raw(1), raw(2), raw(4)], dense=True)

    assert result.outcome == INCOMPLETE
    assert summary(result.findings) == [("incomplete_trace", "warn", 3, 3, 1)]
    assert "3" in result.findings[0].reason


@pytest.mark.parametrize(
    "seqs,missing",
    [((2, 3), [1]), ((1, 4, 7), [2, 3, 5, 6]), ((1, 2, 3, 10), list(range(4, 10)))],
)
def test_every_gap_is_found(seqs, missing) -> None:
    result = check([raw(s) for s in seqs], dense=True)
    assert result.outcome == INCOMPLETE
    (finding,) = result.findings
    assert (finding.first_seq, finding.last_seq, finding.count) == (missing[0], missing[-1], len(missing))


def test_a_huge_gap_is_reported_without_walking_it() -> None:
    result = check([raw(1), raw(10**12)], dense=True)
    assert result.outcome == INCOMPLETE
    f = result.findings[0]
    assert (f.first_seq, f.last_seq, f.count) == (2, 10**12 - 1, 10**12 - 2)  # counted exactly, not capped
    assert f.reason.startswith(f"{10**12 - 2} calls missing from the trace (2, 3, 4, 5, 6, 7, 8, 9, 10, 11 ...)")


def test_gaps_are_counted_exactly_past_a_thousand_and_listed_briefly() -> None:
    result = check([raw(1), raw(1500), raw(1502)], dense=True)
    (f,) = result.findings
    assert (f.first_seq, f.last_seq, f.count) == (2, 1501, 1499)
    assert f.reason.count(",") == 9  # ten numbers shown


@pytest.mark.parametrize("seqs", [(1, 2, 4), (10, 20, 30), (2, 3), (1, 10**12)])
def test_sparse_numbers_are_no_gap_unless_promised_dense(seqs) -> None:
    assert check([raw(s) for s in seqs]).outcome == SCORED
    assert check([raw(s) for s in seqs], dense=True).outcome == INCOMPLETE  # the same calls, promised 1..N


def test_every_call_marked_dense_promises_the_numbering_and_one_unmarked_does_not() -> None:
    marked = [replace(raw(s), seq_dense=True) for s in (1, 2, 4)]
    assert check(marked).outcome == INCOMPLETE
    assert check(marked[:2] + [raw(4)]).outcome == SCORED


def test_an_unfinished_call_is_an_incomplete_trace_with_sparse_numbers_too() -> None:
    result = check([raw(10), raw(20), raw(30, result=None, finished=False)])
    assert result.outcome == INCOMPLETE
    assert summary(result.findings) == [("incomplete_trace", "warn", 30, 30, 1)]


def test_an_unfinished_call_is_an_incomplete_trace() -> None:
    result = check([raw(1), raw(2), raw(3, result=None, finished=False)])

    assert result.outcome == INCOMPLETE
    assert summary(result.findings) == [("incomplete_trace", "warn", 3, 3, 1)]


@pytest.mark.parametrize(
    "calls",
    [
        [raw(i) for i in (1, 2, 4, 5, 6, 7)],  # six identical lookups, one missing
        [raw(i) for i in range(1, 6)] + [raw(6, result=None, finished=False)],
    ],
    ids=["gap", "unfinished"],
)
def test_an_incomplete_run_is_unscorable_never_clean_and_never_a_confirmed_loop(calls) -> None:
    report = judge(RunInput("r", calls, dense_seq=True), fingerprinter())

    assert report.outcome == INCOMPLETE
    assert report.passed is None
    assert report.score == {"scorable": False, "release": None}
    assert {f.kind for f in report.findings} == {"incomplete_trace"}  # no loop verdict on missing evidence
    assert exit_status([report]) == 3


def test_integrity_findings_are_stamped_with_run_and_policy_version() -> None:
    report = judge(RunInput("run-7", [raw(1), raw(3)], dense_seq=True), fingerprinter())
    assert all(f.run_id == "run-7" and f.policy_version == "seed-v1" for f in report.findings)


def test_input_order_does_not_matter() -> None:
    calls = [raw(i) for i in range(1, 6)]
    shuffled = calls[:]
    random.Random(3).shuffle(shuffled)
    fp = fingerprinter()
    assert check(shuffled).calls == calls
    assert judge(RunInput("r", shuffled), fp) == judge(RunInput("r", calls), fp)


def test_a_denied_call_fills_its_sequence_number() -> None:
    calls = [raw(1), raw(2), replace(raw(3), dispatched=False, guard="repeat", ok=False), raw(4, tool="reply", arguments={})]
    assert check(calls).outcome == SCORED


# --- the audit's exit status over reports ---------------------------------------------------


class _R:
    def __init__(self, passed):
        self.passed = passed


@pytest.mark.parametrize(
    "verdicts,status",
    [([True], 0), ([True, True], 0), ([False], 1), ([True, None, False], 1), ([None], 3), ([True, None], 3), ([], 3)],
)
def test_exit_status(verdicts, status) -> None:
    assert exit_status([_R(v) for v in verdicts]) == status


# --- the same rules from NDJSON records ---------------------------------------------------


def test_ndjson_unfinished_call_is_an_incomplete_trace(tmp_path) -> None:
    from score_helpers import call, lookups, one

    report = one(tmp_path, lookups(2) + [call(3, observation=None, finished=False)])
    assert report.outcome == INCOMPLETE and report.passed is None
    assert summary(report.findings) == [("incomplete_trace", "warn", 3, 3, 1)]


def test_ndjson_duplicate_line_is_counted_once_and_a_changed_copy_is_a_conflict(tmp_path) -> None:
    from score_helpers import lookups, one

    records = lookups(2)
    dup = one(tmp_path, records + [dict(records[1])])
    assert dup.outcome == SCORED and dup.passed is True
    assert [f.kind for f in dup.findings] == ["telemetry_duplicate"]
    assert dup.score["tool_calls"] == 2

    changed = one(tmp_path, records + [{**records[1], "observation": {"status": "lost"}}])
    assert changed.outcome == INTEGRITY_ERROR and changed.passed is None
