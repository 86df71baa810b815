"""The journal a run keeps for late calls and snapshots, in its compact forms (issue 26 item 5,
the receiver regression): each call's facts shared (buffer.CallFacts) and a completed run's
journal packed as plain tuples (late.Inputs). Both must give back exactly what the plain form
holds: the same records, equal field by field, and the same verdicts when judged again."""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.calls import NO_EQUIVALENCE, Equivalence, Evidence, GuardEvent, ModelCall, RawCall, ToolCall
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
from otel_loopguard.policy import Policy
from otel_loopguard.progress.evidence import NO_EVIDENCE
from otel_loopguard.receiver.runs import buffer as buffer_module
from otel_loopguard.receiver.runs.buffer import CallFacts, RunBuffer, call_facts, compact, expanded, facts_of
from otel_loopguard.receiver.runs.late import Inputs, packed_op, unpacked_op

FP = Fingerprinter(load_key(key=b"journal-packing-key-0123456789"), Policy())


def _call(seq: int, **kw: Any) -> RawCall:
    base: dict[str, Any] = dict(tool="search", arguments={"q": f"q{seq % 3}"}, result=f'{{"hits": [{seq % 2}]}}',
                                span_id=f"{seq:016x}", trace_id="ab" * 16, start_ns=seq * 1000, end_ns=seq * 1000 + 5,
                                turn=seq)
    base.update(kw)
    return RawCall(seq=seq, **base)


def _journal() -> list[tuple[Any, ...]]:
    """One of every entry kind, calls with and without evidence, equivalence, flags and guard facts."""
    out: list[tuple[Any, ...]] = [("model", ModelCall(turn=1, input_tokens=10, output_tokens=2, model="m", end_ns=7))]
    raws = [_call(1), _call(2, ok=False), _call(3, dispatched=False, guard="repeat"), _call(4, key_id="k2"),
            _call(5, seq_dense=True, finished=False, result=None), _call(6, arguments="not json {")]
    for raw in raws:
        out.append(("call", fingerprint_call(raw, FP), facts_of(raw), "text" if raw.seq % 2 else None))
    bare = ToolCall(seq=7, tool="t", action="a" * 32, result=None, ok=None, evidence=Evidence(version=2.0, item_ids=(1, 2)),
                    equivalence=Equivalence(items=b"\x01" * 8, item_count=1, sketch=b"\x00" * 32), flags=frozenset({"f"}))
    out.append(("call", bare, call_facts((None, True, True, None, None, False)), None))
    out += [("facts", {"loopguard.terminal_response": True}), ("guards", [GuardEvent(time_ns=1, kind="repeat", dispatched=False)]),
            ("gap",), ("turn",), ("cut", "why"), ("handoff", _call(0, tool="transfer_to_b"))]
    return out


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    assert a[0] == b[0] and len(a) == len(b)
    for x, y in zip(a[1:], b[1:]):
        if isinstance(x, CallFacts):
            assert isinstance(y, CallFacts) and x.values() == y.values()
        else:
            assert x == y and type(x) is type(y)


def test_every_entry_comes_back_equal_from_its_packed_form() -> None:
    journal = _journal()
    assert any(op[0] == "call" and op[1].equivalence is not NO_EQUIVALENCE for op in journal)
    for op in journal:
        _same(unpacked_op(packed_op(op)), op)
    back, emitted, noted, agents, roots = Inputs(journal, {1, 2}, (), ((5, "a"),), {"t": "r"}).unpacked()
    assert (emitted, noted, agents, roots) == ({1, 2}, (), ((5, "a"),), {"t": "r"})
    assert len(back) == len(journal)
    for a, b in zip(back, journal):
        _same(a, b)


def test_shared_records_stay_shared_and_calls_pack_as_plain_tuples() -> None:
    """Mutation check: a call packed as its record (not its fields) would pickle Python code."""
    op = ("call", fingerprint_call(_call(1), FP), facts_of(_call(1)), None)
    packed = packed_op(op)
    assert packed[0] == "call*" and all(isinstance(part, (tuple, type(None), str)) for part in packed[1:])
    unpacked = unpacked_op(packed)[1]
    assert unpacked.evidence is NO_EVIDENCE or op[1].evidence is not NO_EVIDENCE


def test_call_facts_are_shared_and_expand_to_the_raw_calls_facts() -> None:
    raw = _call(3, dispatched=False, guard="repeat", key_id="k")
    assert facts_of(raw) is facts_of(_call(9, dispatched=False, guard="repeat", key_id="k"))
    full = expanded(fingerprint_call(raw, FP), facts_of(raw))
    for name in ("seq", "tool", "ok", "finished", "span_id", "dispatched", "guard", "key_id", "trace_id", "seq_dense"):
        assert getattr(full, name) == getattr(raw, name)
    assert compact(("call", None, full, None))[2] is facts_of(raw)


def test_the_interned_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buffer_module, "_interned", {})
    for n in range(buffer_module.MAX_INTERNED_FACTS + 50):
        call_facts((True, True, True, None, f"key-{n}", False))
    assert len(buffer_module._interned) == buffer_module.MAX_INTERNED_FACTS  # noqa: SLF001


def _findings(ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    run = RunBuffer(run_id="r", fp=FP, now=0.0)
    found = run.rejudge(ops, (), 0.0)
    return [(f.kind, f.severity, f.first_seq, f.last_seq, f.reason) for f in found] + [run.score()]


def test_a_run_judged_from_the_packed_journal_is_judged_as_from_the_plain_one() -> None:
    """The verdicts of a looping run and a legitimate one, from the journal as kept, as a
    snapshot shows it (RawCall facts), and as packed: equal, and the loop is found."""
    verdicts = {}
    for label, same in (("loop", True), ("paging", False)):
        run = RunBuffer(run_id="r", fp=FP, now=0.0, journal=True)
        for n in range(1, 9):
            run.add_call(_call(n, arguments={"q": "same" if same else f"page {n}"},
                               result='{"hits": [1]}' if same else f"[{n}]"), 0.0)
        kept = list(run.ops or [])
        plain = run.journal or []
        packed = Inputs(kept, set(), (), (), {}).unpacked()[0]
        assert isinstance(plain[1][2], RawCall) and isinstance(kept[1][2], CallFacts)
        assert _findings(kept) == _findings(plain) == _findings(packed)
        verdicts[label] = {kind for kind, *_ in _findings(kept)[:-1]}
    assert "repeat" in verdicts["loop"] and not verdicts["paging"] & {"repeat", "no_progress"}
