"""The receiver's reading of sequences (docs/findings.md#sequences): a `loopguard.seq` that is
not marked dense orders calls but is no promise of 1..N, so 10, 20, 30 are judged as three
calls in a row when the run completes, and findings keep those numbers."""

from __future__ import annotations

from dataclasses import replace

from otel_loopguard.calls import RawCall
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import policy_from_mapping
from otel_loopguard.receiver.runs.buffer import RunBuffer

POLICY = policy_from_mapping({"version": "t", "repeat": {"allowed_repeats": 2}})


def lookup(seq: int, dense: bool = False, order: str = "A12") -> RawCall:
    return RawCall(seq=seq, tool="lookup_order", arguments={"order_id": order}, result={"status": "delivered", "version": 7},
                   span_id=f"{seq:016x}", start_ns=seq * 1000, end_ns=seq * 1000 + 10, seq_dense=dense)


def buffer(dense_seq: bool = False) -> RunBuffer:
    return RunBuffer("r", Fingerprinter(load_key(key="receiver-sparse-test-key-0123456"), POLICY), 0.0,
                     dense_seq=dense_seq)


def judged(calls: list[RawCall], dense_seq: bool = False) -> tuple[RunBuffer, list]:
    b = buffer(dense_seq)
    found = []
    for c in calls:
        found += b.add_call(c, 0.0)
    found += b.complete()
    return b, found


def test_sparse_numbers_are_three_calls_in_a_row_and_keep_their_numbers() -> None:
    b, found = judged([lookup(30), lookup(10), lookup(20)])  # arrival order is not the order
    assert [(f.kind, f.severity, f.first_seq, f.last_seq, f.count) for f in found] == [("repeat", "stop", 10, 30, 3)]
    assert f"{b.score()[0]}" == "scored"


def test_negative_control_a_different_third_call_raises_nothing() -> None:
    _, found = judged([lookup(10), lookup(20), lookup(30, order="A13")])
    assert found == []


def test_marked_dense_the_same_numbers_are_missing_calls() -> None:
    b, found = judged([lookup(s, dense=True) for s in (10, 20, 30)])
    assert {f.kind for f in found} == {"incomplete_trace"}
    assert b.score()[0] == "incomplete_trace"
    b, _ = judged([lookup(10), lookup(20), lookup(30)], dense_seq=True)  # serve --dense-seq
    assert b.score()[0] == "incomplete_trace"


def test_two_calls_claiming_one_sparse_number_are_a_conflict() -> None:
    b, found = judged([lookup(10), lookup(20), replace(lookup(20, order="B7"), span_id="ff" * 8)])
    assert [f.kind for f in found] == ["integrity_conflict"]
    assert b.score()[0] == "integrity_error"


def test_a_stop_acted_on_at_the_next_call_is_on_time_at_the_next_sparse_number() -> None:
    # Four failures at 10..40, the guard's denial recorded on call 50: on time, not 41.
    failing = [replace(lookup(s, order=f"X{s}"), ok=False) for s in (10, 20, 30, 40)]
    denied = replace(lookup(50, order="X50"), dispatched=False, guard="error_streak", ok=False)
    b, found = judged(failing + [denied])
    assert ("error_streak", "stop", 10, 40, 4) in [(f.kind, f.severity, f.first_seq, f.last_seq, f.count) for f in found]
    outcome, score = b.score()
    assert outcome == "scored"
    assert not any(v.startswith("guard_too_late") for v in score["release"]["violations"])  # type: ignore[index]
