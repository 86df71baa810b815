"""Open runs saved at shutdown and restored at start (receiver/state/snapshot.py): a run split there is
judged exactly as the same run judged in one piece; a damaged or foreign snapshot is set aside
with a log line and costs nothing else."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.calls import ModelCall, RawCall
from otel_loopguard.canon import ephemeral_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import load_policy
from otel_loopguard.receiver.state import snapshot
from otel_loopguard.receiver.runs.buffer import RunBuffer

POLICY = Path(__file__).with_name("tight-budget.yaml")  # turns and tokens count: model calls matter
FP = Fingerprinter(ephemeral_key(), load_policy(POLICY))


def calls(tagged: bool, looping: bool) -> list[Any]:
    """A run's inputs: a model decision before each call; calls 3-5 with an error, a guard and a write."""
    out: list[Any] = []
    for i in range(1, 11):
        out.append(ModelCall(turn=0, input_tokens=100 * i, output_tokens=10, model="m", end_ns=i * 1000))
        args = {"order_id": "A1"} if looping or i % 3 == 0 else {"order_id": f"A{i}"}
        out.append(RawCall(seq=i if tagged else 0, tool="lookup_order", arguments=json.dumps(args),
                           result=json.dumps({"status": "delivered", "version": 1}), ok=i != 4, turn=i,
                           span_id=f"{i:016x}", trace_id="ab" * 16, start_ns=i * 1000 + 1, end_ns=i * 1000 + 2,
                           seq_dense=tagged, guard="repeat" if i == 5 else None, key_id="local"))
    out.append({"loopguard.termination_reason": "final_answer"})
    return out


def feed(buffer: RunBuffer, inputs: list[Any]) -> None:
    for item in inputs:
        if isinstance(item, ModelCall):
            buffer.add_model(item, 0.0)
        elif isinstance(item, RawCall):
            buffer.add_call(item, 0.0)
        else:
            buffer.note_facts(item)


def verdict(buffer: RunBuffer) -> tuple[Any, ...]:
    buffer.complete()
    findings = [(f.kind, f.severity, f.first_seq, f.last_seq, f.count, f.reason) for f in buffer.findings]
    return (findings, buffer.score())


def through_a_file(buffer: RunBuffer, tmp_path: Path) -> RunBuffer:
    snapshot.save(tmp_path, [buffer], FP, now=10.0, dense_seq=False)
    restored: list[RunBuffer] = []
    assert snapshot.load(tmp_path, FP, 50.0, lambda b, traces: restored.append(b)) is not None
    assert len(restored) == 1
    assert not (tmp_path / snapshot.FILE).exists()  # a restored snapshot is not restored twice
    return restored[0]


@pytest.mark.parametrize("tagged", [True, False], ids=["processor-tagged", "untagged"])
@pytest.mark.parametrize("looping", [True, False], ids=["loop", "healthy"])
@pytest.mark.parametrize("split", [1, 6, 13, 21])
def test_a_run_saved_and_restored_mid_way_is_judged_as_the_same_run_in_one_piece(
        tmp_path: Path, tagged: bool, looping: bool, split: int) -> None:
    inputs = calls(tagged, looping)
    whole = RunBuffer("run-1", FP, 0.0)
    feed(whole, inputs)
    first = RunBuffer("run-1", FP, 0.0)
    first.journal = []
    feed(first, inputs[:split])
    second = through_a_file(first, tmp_path)
    assert second.restored and second.journal is not None
    feed(second, inputs[split:])
    assert verdict(second) == verdict(whole)


def test_without_the_snapshot_the_later_half_is_judged_differently(tmp_path: Path) -> None:
    """The control: the comparison above can fail."""
    inputs = calls(tagged=False, looping=True)
    whole, half = RunBuffer("run-1", FP, 0.0), RunBuffer("run-1", FP, 0.0)
    feed(whole, inputs)
    feed(half, inputs[13:])
    assert verdict(half) != verdict(whole)


def saved(tmp_path: Path, runs: int = 2) -> Path:
    buffers = []
    for n in range(runs):
        b = RunBuffer(f"run-{n}", FP, 0.0)
        b.journal = []
        feed(b, calls(tagged=True, looping=True)[:6])
        buffers.append(b)
    snapshot.save(tmp_path, buffers, FP, now=1.0, dense_seq=False)
    return tmp_path / snapshot.FILE


def restore(tmp_path: Path, fp: Fingerprinter = FP) -> list[str]:
    got: list[str] = []
    snapshot.load(tmp_path, fp, 5.0, lambda b, traces: got.append(b.run_id))
    return got


@pytest.mark.parametrize("damage,why", [
    (lambda text: "\x80 not json at all\n", "does not start with a snapshot header"),
    (lambda text: text.replace('"version": 1', '"version": 99', 1), "format version 99"),
    (lambda text: text.replace('"format": "otel-loopguard open runs"', '"format": "other"', 1), "is not an otel-loopguard"),
])
def test_a_foreign_or_damaged_snapshot_is_set_aside_with_a_reason(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                   damage: Any, why: str) -> None:
    path = saved(tmp_path)
    path.write_text(damage(path.read_text()))
    with caplog.at_level(logging.ERROR):
        assert restore(tmp_path) == []
    assert why in caplog.text and (tmp_path / (snapshot.FILE + ".rejected")).exists()
    assert not path.exists()


def test_a_snapshot_under_another_key_is_not_restored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    saved(tmp_path)
    with caplog.at_level(logging.ERROR):
        assert restore(tmp_path, Fingerprinter(ephemeral_key(), FP.policy)) == []
    assert "digest key id" in caplog.text


@pytest.mark.parametrize("mutate", [
    lambda run: run["journal"][1][1].update(seq="1"),  # a string where a number belongs
    lambda run: run["journal"][1][1].update(evidence={"__class__": "os.system"}),
    lambda run: run["journal"].append(["exec", "print('no')"]),
    lambda run: run.update(traces=["zz" * 16]),
    lambda run: run["journal"][1][2].update(seq=True),  # a bool is no sequence number
])
def test_one_bad_run_costs_only_that_run(tmp_path: Path, caplog: pytest.LogCaptureFixture, mutate: Any) -> None:
    path = saved(tmp_path, runs=3)
    lines = path.read_text().splitlines()
    bad = json.loads(lines[2])
    mutate(bad)
    lines[2] = json.dumps(bad)
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.ERROR):
        assert restore(tmp_path) == ["run-0", "run-2"]
    assert "line 3: a saved run cannot be restored" in caplog.text
