"""A run's model decisions for the waste of its findings (RunBuffer.models): fed from the journal
as it grows, never read whole again per finding, and always what an index made at that moment
from the whole journal gives (the plain path: findings/waste.py ModelIndex of the journal's
model entries). Unknown when no journal is kept, or once it grew past MAX_JOURNAL."""

from __future__ import annotations

import random
from typing import Any

from otel_loopguard.calls import ModelCall, RawCall
from otel_loopguard.canon import load_key
from otel_loopguard.findings.waste import ModelIndex
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import policy_from_mapping
from otel_loopguard.receiver.runs import buffer as buffer_module
from otel_loopguard.receiver.runs.buffer import RunBuffer

POLICY = policy_from_mapping({"version": "t", "prices": {"m1": {"input": 3.0, "output": 15.0}}})
FP = Fingerprinter(load_key(key="receiver-waste-index-key-01234567"), POLICY)
WINDOWS = [(-1, 10**12), (0, 5_000), (2_500, 9_000), (7_000, 7_000), (12_000, 30_000)]


def _call(seq: int) -> RawCall:
    return RawCall(seq=seq, tool="search", arguments={"q": "same"}, result='{"hits": []}', span_id=f"{seq:016x}",
                   trace_id="cd" * 16, start_ns=seq * 1000, end_ns=seq * 1000 + 400, seq_dense=True)


def _model(end_ns: int, n: int) -> ModelCall:
    return ModelCall(turn=0, input_tokens=100 + n, output_tokens=7 * n, model="m1" if n % 3 else "m2", end_ns=end_ns)


def plain(b: RunBuffer) -> Any:
    """What the receiver did before: the whole journal read for each finding."""
    journal = b.journal
    index = ModelIndex(None if journal is None else (op[1] for op in journal if op[0] == "model"), POLICY.price_for)
    return index.known, [index.between(*w) for w in WINDOWS]


def fed(b: RunBuffer) -> Any:
    index = b.models()
    return index.known, [index.between(*w) for w in WINDOWS]


def test_fed_as_the_journal_grows_equals_the_whole_journal_read_at_each_finding() -> None:
    rng = random.Random(7)
    b = RunBuffer("r", FP, 0.0, journal=True)
    found = 0
    for seq in range(1, 60):
        found += len(b.add_call(_call(seq), 0.0))
        if rng.random() < 0.7:  # mostly in end order, some late
            end = seq * 1000 - 100 if rng.random() < 0.8 else rng.randrange(0, seq * 1000)
            b.add_model(_model(end, seq), 0.0)
        if rng.random() < 0.5:
            assert fed(b) == plain(b)
    assert found, "the run loops: its findings are the ones that ask"
    assert fed(b) == plain(b) and fed(b)[0]
    # The journal replaced (a snapshot restored): read again from its start.
    b.journal = [op for op in b.journal if op[0] != "model" or op[1].end_ns % 2000]
    assert fed(b) == plain(b)


def test_no_journal_or_one_grown_too_long_is_unknown(monkeypatch) -> None:
    none = RunBuffer("r", FP, 0.0, journal=False)
    none.add_model(_model(10, 1), 0.0)
    assert fed(none) == plain(none) and not fed(none)[0]
    monkeypatch.setattr(buffer_module, "MAX_JOURNAL", 6)
    b = RunBuffer("r", FP, 0.0, journal=True)
    for seq in range(1, 4):
        b.add_model(_model(seq * 1000 - 1, seq), 0.0)
        b.add_call(_call(seq), 0.0)
    assert fed(b) == plain(b) and fed(b)[0]
    b.add_model(_model(3500, 4), 0.0)  # the seventh entry: the journal is dropped
    assert b.journal is None and fed(b) == plain(b) and not fed(b)[0]


def test_each_journal_entry_is_read_once_however_many_findings_ask(monkeypatch) -> None:
    """The cost the plain path had: every finding expanded the whole journal (O(n) a finding)."""
    b = RunBuffer("r", FP, 0.0, journal=True)
    added: list[int] = []
    real_add = ModelIndex.add
    monkeypatch.setattr(ModelIndex, "add", lambda self, m: (added.append(m.end_ns), real_add(self, m))[1])
    for seq in range(1, 30):
        b.add_model(_model(seq * 1000 - 100, seq), 0.0)
        b.add_call(_call(seq), 0.0)
        b.models()
        b.models()
    assert sorted(added) == [seq * 1000 - 100 for seq in range(1, 30)]
