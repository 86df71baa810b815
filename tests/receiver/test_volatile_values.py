"""The receiver judges processor-tagged spans by their digests: the masked
`loopguard.result.digest` for the same action, the `loopguard.result.exact_digest` for new
information across actions (issue 14)."""

from __future__ import annotations

from otel_loopguard.calls import RawCall
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import policy_from_mapping
from otel_loopguard.receiver.runs.buffer import RunBuffer

FP = Fingerprinter(load_key(key="receiver-volatile-test-key-01234"), policy_from_mapping({"version": "t"}))


def tagged(seq: int, action: str, masked: str, exact: str | None) -> RawCall:
    return RawCall(seq=seq, tool="read_messages", span_id=f"{seq:016x}", args_digest=action,
                   result_digest=masked, result_exact_digest=exact, key_id=FP.key_id, seq_dense=True)


def judged(calls: list[RawCall]) -> list[tuple]:
    b = RunBuffer("r", FP, 0.0)
    found = []
    for c in calls:
        found += b.add_call(c, 0.0)
    found += b.complete()
    return [(f.kind, f.severity, f.last_seq) for f in found]


def test_one_masked_answer_with_fresh_exact_digests_is_a_loop_by_call_8() -> None:
    found = judged([tagged(i, "a" * 32, "m" * 32, f"{i:032x}") for i in range(1, 9)])
    stops = [f for f in found if f[1] == "stop"]
    assert stops and stops[0][2] <= 8


def test_other_actions_with_one_masked_shape_and_new_exact_results_bring_new_information() -> None:
    # Pages of new ids: the masked digests agree across actions, the exact ones never repeat.
    found = judged([tagged(i, f"{i:032x}", "m" * 32, f"e{i:031x}") for i in range(1, 9)])
    assert found == []


def test_control_without_exact_digests_the_same_masked_pages_look_stale() -> None:
    found = judged([tagged(i, f"{i:032x}", "m" * 32, None) for i in range(1, 9)])
    assert ("no_progress", "stop", 7) in found  # what the exact digest prevents above
