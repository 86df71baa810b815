"""The shared records are plain dataclasses built by keyword: a field is added in one place.

The records made once per call or span (RawCall, ToolCall, ModelCall, ToolSpan, ModelSpan) are
not frozen: a frozen dataclass sets each field through object.__setattr__, which tripled the
cost of building a ToolCall (docs/performance.md). Nothing changes one after it is built: copies
go through dataclasses.replace. The others stay frozen.

Adding a field to ToolCall once meant four edits (the class, a positional copy, a positional
build in fingerprint/call.py, a test pinning the order). Now every record is keyword-only, so
no caller depends on the order fields are declared in; these tests fail when one does.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.calls import Evidence, GuardEvent, ModelCall, RawCall, RecordedDecision, RunFacts, ToolCall
from otel_loopguard.conventions.recognise import ModelSpan, ToolSpan
from otel_loopguard.findings.model import Finding

PACKAGE = Path(__file__).resolve().parents[1] / "otel_loopguard"
RECORDS = (RawCall, ToolCall, ModelCall, Evidence, RunFacts, GuardEvent, RecordedDecision, Finding, ToolSpan, ModelSpan)


def _tool_call(**over: Any) -> ToolCall:
    return ToolCall(**{"seq": 1, "tool": "t", "action": "a", "result": "r", "ok": True, **over})


PER_CALL = (RawCall, ToolCall, ModelCall, ToolSpan, ModelSpan)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_every_record_takes_keywords_only(record: type) -> None:
    assert all(f.kw_only for f in dataclasses.fields(record)), record
    assert record.__dataclass_params__.frozen == (record not in PER_CALL)  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="positional"):
        record(1)


@pytest.mark.parametrize("record", PER_CALL, ids=lambda r: r.__name__)
def test_records_made_per_call_have_slots_and_no_instance_dict(record: type) -> None:
    assert "__slots__" in vars(record) and "__dict__" not in dir(record)


def test_equal_by_fields_and_replaceable() -> None:
    call = _tool_call(span_id="s")
    assert (call.turn, call.evidence, call.flags) == (None, Evidence(), frozenset())
    assert call == _tool_call(span_id="s")
    assert call != _tool_call(span_id="other")  # negative control: equality compares fields
    moved = dataclasses.replace(call, seq=7)
    assert moved.seq == 7 and moved.span_id == "s" and call.seq == 1
    assert repr(call).startswith("ToolCall(seq=1, tool='t'")


def test_a_default_factory_gives_each_instance_its_own_value() -> None:
    a, b = RawCall(seq=1, tool="t"), RawCall(seq=2, tool="t")
    assert a.identity == {} and a.identity is not b.identity
    given = {"k": 1}
    assert RawCall(seq=1, tool="t", identity=given).identity is given


@pytest.mark.parametrize("call", [
    RawCall(seq=0, tool="t", arguments='{"a": 1}', result="r", ok=False, finished=False, turn=3, call_id="c",
            span_id="s", start_ns=1, end_ns=2, identity={"k": 1}, args_digest="ad", result_digest="rd",
            dispatched=False, guard="g", key_id="kid", trace_id="tr", parent_id="p", seq_dense=True,
            result_exact_digest="xd"),
    ToolCall(seq=0, tool="t", action="a", result="r", ok=False, turn=3, call_id="c", span_id="s", start_ns=1,
             end_ns=2, evidence=Evidence(version=1.0), trace_id="tr", parent_id="p", write="w", write_key="wk",
             flags=frozenset({"f"}), exact="x"),
])
def test_renumbered_changes_seq_and_turn_and_keeps_every_other_field(call: Any) -> None:
    moved = call.renumbered(9, 4)
    assert [f.name for f in dataclasses.fields(call) if getattr(moved, f.name) != getattr(call, f.name)] == ["seq", "turn"]


def test_a_new_field_needs_no_edit_beyond_its_class() -> None:
    """A record with one more field (declared as a subclass here) goes through the copy and
    the fingerprint paths unchanged: nothing lists the fields a second time."""

    @dataclasses.dataclass(slots=True, kw_only=True)
    class Wider(ToolCall):
        extra: str = "none"

    wide = Wider(seq=1, tool="t", action="a", result=None, ok=True, extra="kept")
    moved = wide.renumbered(5, 2)
    assert type(moved) is Wider and (moved.seq, moved.turn, moved.extra) == (5, 2, "kept")


# --- no module builds a record by position, nor lists a record's fields again -------------------

_NAMES = {r.__name__ for r in RECORDS} | {"fingerprint_finished"}


def _calls_by_position(path: Path, base: Path = PACKAGE) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            allowed = 1 if name == "fingerprint_finished" else 0  # its Fingerprinter comes first
            if name in _NAMES and (len(node.args) > allowed or any(isinstance(a, ast.Starred) for a in node.args)):
                out.append(f"{path.relative_to(base)}:{node.lineno} {name}")
    return out


def test_no_module_builds_a_record_by_position() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _calls_by_position(path)]
    assert found == []


def test_the_scan_sees_a_positional_build(tmp_path: Path) -> None:
    """Negative control for the scan above."""
    probe = tmp_path / "probe.py"
    probe.write_text("ToolCall(1, 't', 'a', None, True)\nfingerprint_finished(fp, seq=1)\nRawCall(*args)\n",
                     encoding="utf-8")
    assert _calls_by_position(probe, tmp_path) == ["probe.py:1 ToolCall", "probe.py:3 RawCall"]


# The snapshot file format names ToolCall's fields with the JSON types it accepts: the one other
# place a new field must be named, and test_snapshot_format_covers_every_tool_call_field makes it
# fail loudly instead of losing the field across a restart.
_FIELD_LISTS_ALLOWED = {"receiver/state/snapshot.py"}


def _field_lists(path: Path, names: set[str]) -> list[int]:
    """Line numbers of literals naming five or more of a record's fields (a second field list)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None) \
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else None
        if elements:
            strings = {e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if len(strings & names) >= 5:
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("record", [ToolCall, RawCall], ids=lambda r: r.__name__)
def test_no_module_lists_the_fields_of_a_call_record(record: type) -> None:
    names = {f.name for f in dataclasses.fields(record)} - {"seq", "tool", "result", "ok", "turn"}  # common words
    found = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
             if (lines := _field_lists(p, names)) and str(p.relative_to(PACKAGE)) not in _FIELD_LISTS_ALLOWED}
    assert found == {}


def test_snapshot_format_covers_every_tool_call_field() -> None:
    from otel_loopguard.receiver.state import snapshot

    saved = set(snapshot._TOOL_CALL) | {"flags", "evidence", "equivalence"}  # noqa: SLF001 - our own module
    assert saved == {f.name for f in dataclasses.fields(ToolCall)}
    assert set(snapshot._EVIDENCE) | {"item_ids"} == {f.name for f in dataclasses.fields(Evidence)}  # noqa: SLF001
