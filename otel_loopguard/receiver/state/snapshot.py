"""Open runs saved at shutdown and restored at start (`state_dir`): a run a restart splits is
judged as one run.

What is saved is not the detectors' state but each run's inputs after fingerprinting, in order
(`RunBuffer.journal`: tool calls as `ToolCall` records plus the numbering and guard facts the
run reads, model calls, facts, guard events, and the moments a gap or a turn was judged).
Replayed into a new `RunBuffer` they rebuild the same state by the same code, so no detector
needs a serialised form of its own. Findings the replay raises again were reported before the
restart: they are kept for the run's score, not sent twice.

Format: `<state_dir>/runs.jsonl`, JSON lines, written to a temporary file, flushed to disk and
renamed into place. The first line says what the file is (`format`, `version`) and under which
key id and policy version its digests were computed; each further line is one run. Reading
never executes anything from the file: every value is checked against the record it fills
(type by type) before a record is built. A file of another format, version, key or policy is
set aside (`runs.jsonl.rejected`) with a log line, and its runs are not restored (their later
spans are then judged as cut runs, restart.py); one bad run line costs only that run. A
restored snapshot is deleted, so a later crash cannot restore it a second time.

The file holds digests, tool names, ids and the first few hundred characters of the arguments
of recent actions (as finding spans show them): the state directory must be as private as the
spans themselves.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ...calls import NO_EQUIVALENCE, Evidence, GuardEvent, ModelCall, RawCall, ToolCall
from ...conventions.sketches import from_attributes, to_attributes
from ...fingerprint import Fingerprinter
from ..runs.buffer import RunBuffer

_log = logging.getLogger("otel_loopguard.receiver")

FORMAT, VERSION = "otel-loopguard open runs", 1
FILE = "runs.jsonl"


class SnapshotError(ValueError):
    """A value in a snapshot is not what its record needs."""


# -- records <-> JSON -----------------------------------------------------------------------
# Each record's fields with the JSON types they accept (None where the field is optional).
_OPT_STR, _OPT_INT, _OPT_BOOL = (str, type(None)), (int, type(None)), (bool, type(None))
_TOOL_CALL: dict[str, tuple[type, ...]] = {
    "seq": (int,), "tool": (str,), "action": (str,), "result": _OPT_STR, "ok": _OPT_BOOL, "turn": _OPT_INT,
    "call_id": _OPT_STR, "span_id": _OPT_STR, "start_ns": _OPT_INT, "end_ns": _OPT_INT, "trace_id": _OPT_STR,
    "parent_id": _OPT_STR, "write": _OPT_STR, "write_key": _OPT_STR, "exact": _OPT_STR,
}
_EVIDENCE: dict[str, tuple[type, ...]] = {
    "version": (int, float, type(None)), "state": _OPT_STR, "terminal": (bool,), "cursor": _OPT_STR,
    "error_count": _OPT_INT,
}
_RAW_FACTS: dict[str, tuple[type, ...]] = {  # what RunBuffer._place reads of a call besides its ToolCall
    "seq": (int,), "tool": (str,), "ok": _OPT_BOOL, "finished": (bool,), "span_id": _OPT_STR,
    "dispatched": (bool,), "guard": _OPT_STR, "key_id": _OPT_STR, "trace_id": _OPT_STR, "seq_dense": (bool,),
}
_HANDOFF = {**_RAW_FACTS, "turn": _OPT_INT, "call_id": _OPT_STR, "start_ns": _OPT_INT, "end_ns": _OPT_INT,
            "parent_id": _OPT_STR, "args_digest": _OPT_STR, "result_digest": _OPT_STR}
_MODEL: dict[str, tuple[type, ...]] = {"turn": (int,), "input_tokens": (int,), "output_tokens": (int,),
                                       "model": _OPT_STR, "end_ns": _OPT_INT}
_GUARD: dict[str, tuple[type, ...]] = {"time_ns": (int,), "kind": _OPT_STR, "dispatched": (bool,), "tool": _OPT_STR}


def _fields(record: Any, schema: dict[str, tuple[type, ...]]) -> dict[str, Any]:
    return {name: getattr(record, name) for name in schema}


def _checked(data: Any, schema: dict[str, tuple[type, ...]], what: str) -> dict[str, Any]:
    if not isinstance(data, dict) or set(data) != set(schema):
        raise SnapshotError(f"{what}: expected the fields {sorted(schema)}")
    for name, kinds in schema.items():
        value = data[name]
        # bool is an int to Python: an int field must not take true/false, nor a bool field 1.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise SnapshotError(f"{what}.{name}: {type(value).__name__} is not allowed")
    return data


def _tool_call_out(c: ToolCall) -> dict[str, Any]:
    e = c.evidence
    return {**_fields(c, _TOOL_CALL), "flags": sorted(c.flags),
            "evidence": {**_fields(e, _EVIDENCE), "item_ids": list(e.item_ids)},
            "equivalence": to_attributes(c.equivalence)}


def _tool_call_in(data: Any) -> ToolCall:
    if not isinstance(data, dict):
        raise SnapshotError("call: not an object")
    flags, evidence = data.get("flags"), data.get("evidence")
    sketches = data.get("equivalence", {})  # absent in a snapshot saved before sketches existed
    plain = _checked({k: v for k, v in data.items() if k not in ("flags", "evidence", "equivalence")}, _TOOL_CALL,
                     "call")
    if not isinstance(sketches, dict):
        raise SnapshotError("call.equivalence: not an object")
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise SnapshotError("call.flags: expected a list of strings")
    if not isinstance(evidence, dict):
        raise SnapshotError("call.evidence: not an object")
    items = evidence.get("item_ids")
    if not isinstance(items, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise SnapshotError("call.evidence.item_ids: expected a list of integers")
    ev = _checked({k: v for k, v in evidence.items() if k != "item_ids"}, _EVIDENCE, "call.evidence")
    return ToolCall(**plain, flags=frozenset(flags), evidence=Evidence(**ev, item_ids=tuple(items)),
                    equivalence=from_attributes(sketches) or NO_EQUIVALENCE)


def _op_out(op: tuple[Any, ...]) -> list[Any]:
    kind = op[0]
    if kind == "call":
        return [kind, _tool_call_out(op[1]), _fields(op[2], _RAW_FACTS), op[3]]
    if kind == "handoff":
        raw: RawCall = op[1]
        return [kind, {**_fields(raw, _HANDOFF), "arguments": raw.arguments, "result": raw.result,
                       "identity": dict(raw.identity)}]
    if kind == "model":
        model: ModelCall = op[1]
        record = None if model.requested is None else dict(model.requested)
        return [kind, {**_fields(model, _MODEL), "span_id": model.span_id, "requested": record}]
    if kind == "guards":
        return [kind, [_fields(e, _GUARD) for e in op[1]]]
    return list(op)  # facts (a dict of two plain values), gap, turn, cut (a reason)


def _op_in(data: Any) -> tuple[Any, ...]:
    if not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise SnapshotError("journal entry: expected [kind, ...]")
    kind, rest = data[0], data[1:]
    if kind == "call" and len(rest) == 3 and isinstance(rest[2], (str, type(None))):
        return (kind, _tool_call_in(rest[0]), RawCall(**_checked(rest[1], _RAW_FACTS, "call facts")), rest[2])
    if kind == "handoff" and len(rest) == 1 and isinstance(rest[0], dict):
        payload = {k: rest[0].get(k) for k in ("arguments", "result", "identity")}
        facts = _checked({k: v for k, v in rest[0].items() if k not in payload}, _HANDOFF, "handoff")
        if not isinstance(payload["identity"], dict):
            raise SnapshotError("handoff.identity: not an object")
        return (kind, RawCall(**facts, arguments=payload["arguments"], result=payload["result"],
                              identity=payload["identity"]))
    if kind == "model" and len(rest) == 1 and isinstance(rest[0], dict):
        return (kind, _model_in(rest[0]))
    if kind == "guards" and len(rest) == 1 and isinstance(rest[0], list):
        return (kind, [GuardEvent(**_checked(e, _GUARD, "guard")) for e in rest[0]])
    if kind == "facts" and len(rest) == 1 and isinstance(rest[0], dict):
        return (kind, {k: v for k, v in rest[0].items() if isinstance(v, (str, bool))})
    if kind in ("gap", "turn") and not rest:
        return (kind,)
    if kind == "cut" and len(rest) == 1 and isinstance(rest[0], str):
        return (kind, rest[0])
    raise SnapshotError(f"journal entry {kind!r}: not a known entry of this form")


def _model_in(data: dict[str, Any]) -> ModelCall:
    """A model call; its span id and record of the conversation are absent in a snapshot saved
    before the receiver read them (none then)."""
    span_id, requested = data.get("span_id"), data.get("requested")
    plain = _checked({k: v for k, v in data.items() if k not in ("span_id", "requested")}, _MODEL, "model")
    if not isinstance(span_id, (str, type(None))):
        raise SnapshotError(f"model.span_id: {type(span_id).__name__} is not allowed")
    if requested is not None and (not isinstance(requested, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in requested.values())):
        raise SnapshotError("model.requested: expected an object of integers")
    return ModelCall(**plain, span_id=span_id, requested=requested)


# -- one run -------------------------------------------------------------------------------------
def run_out(buffer: RunBuffer, now: float, dense_seq: bool) -> dict[str, Any]:
    assert buffer.journal is not None

    def age(t: Optional[float]) -> Optional[float]:
        return None if t is None else max(0.0, now - t)

    return {"run_id": buffer.run_id, "first_seq": buffer.first_seq, "dense_seq": dense_seq,
            "traces": sorted(t.hex() for t in buffer.traces), "roots": dict(buffer.roots),
            "idle": age(buffer.last_activity), "turn_ended": age(buffer.turn_ended_at),
            "journal": [_op_out(op) for op in buffer.journal]}


def run_in(data: Any, fp: Fingerprinter, now: float) -> tuple[RunBuffer, list[bytes]]:
    """A run rebuilt from its snapshot line, and its trace ids."""
    if not isinstance(data, dict):
        raise SnapshotError("run: not an object")
    run_id, first_seq, dense = data.get("run_id"), data.get("first_seq"), data.get("dense_seq")
    traces, roots, journal = data.get("traces"), data.get("roots"), data.get("journal")
    if not isinstance(run_id, str) or not isinstance(first_seq, int) or not isinstance(dense, bool):
        raise SnapshotError("run: run_id, first_seq or dense_seq missing or of the wrong type")
    if not isinstance(traces, list) or not all(isinstance(t, str) and len(t) == 32 for t in traces):
        raise SnapshotError("run.traces: expected 32-hex-digit trace ids")
    if not isinstance(roots, dict) or not all(isinstance(v, str) for v in roots.values()):
        raise SnapshotError("run.roots: expected trace id -> span id")
    if not isinstance(journal, list):
        raise SnapshotError("run.journal: expected a list")
    ops = [_op_in(op) for op in journal]  # every entry checked before any is applied
    buffer = RunBuffer(run_id=run_id, fp=fp, now=now, first_seq=first_seq, dense_seq=dense, journal=True,
                       restored=True)
    for op in ops:
        buffer.replay(op, now)
    buffer.roots.update(roots)
    buffer.last_activity = now - _seconds(data.get("idle"))
    turn = data.get("turn_ended")
    buffer.turn_ended_at = None if turn is None else now - _seconds(turn)
    try:
        return buffer, [bytes.fromhex(t) for t in traces]
    except ValueError:
        raise SnapshotError("run.traces: not hexadecimal") from None


def _seconds(value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1e9:
        raise SnapshotError("run: an age is not a number of seconds")
    return float(value)


# -- the file --------------------------------------------------------------------------------------
def save(directory: Path, runs: list[RunBuffer], fp: Fingerprinter, now: float, dense_seq: bool,
         late: Optional[dict[str, Any]] = None, cut: Optional[list[str]] = None) -> int:
    """Write the runs (with the late cache and the ids of the runs judged as cut at this
    shutdown, in the header); returns how many runs were written."""
    path, tmp = directory / FILE, directory / (FILE + ".tmp")
    header = {"format": FORMAT, "version": VERSION, "key_id": fp.key_id, "policy": fp.policy.version,
              "written_ns": time.time_ns(), "late": late or {"runs": [], "traces": []}, "cut": cut or []}
    with open(tmp, "w", encoding="utf-8") as out:
        os.chmod(tmp, 0o600)
        out.write(json.dumps(header) + "\n")
        for buffer in runs:
            out.write(json.dumps(run_out(buffer, now, dense_seq), ensure_ascii=False, default=str) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return len(runs)


class Header:
    """What a clean shutdown said besides its open runs: the late cache and the runs it cut."""

    def __init__(self, late_runs: list[tuple[str, int]], late_traces: list[tuple[str, bytes, float]], cut: list[str]):
        self.late_runs, self.late_traces, self.cut = late_runs, late_traces, cut


def load(directory: Path, fp: Fingerprinter, now: float,
         adopt: Callable[[RunBuffer, list[bytes]], None]) -> Optional[Header]:
    """Restore the runs of a snapshot through `adopt`; the header of a usable snapshot (None:
    none, or one set aside). The file is deleted (or set aside) either way."""
    path = directory / FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        _reject(path, f"cannot be read ({exc})")
        return None
    problem = _header_problem(lines[0] if lines else "", fp)
    if problem:
        _reject(path, problem, len(lines) - 1)
        return None
    header = _header(json.loads(lines[0]), path)
    restored = 0
    for number, line in enumerate(lines[1:], start=2):
        try:
            buffer, traces = run_in(json.loads(line), fp, now)
        except (SnapshotError, ValueError, TypeError, RecursionError) as exc:
            _log.error("state dir: %s line %d: a saved run cannot be restored (%s); its later spans are judged as "
                       "a cut run", path, number, exc)
            continue
        adopt(buffer, traces)
        restored += 1
    path.unlink()
    _log.info("state dir: %d open runs restored from the last shutdown", restored)
    return header


def _header(data: dict[str, Any], path: Path) -> Header:
    """The late cache and cut runs, each entry checked; a bad part is dropped with a log line."""
    late, cut = data.get("late"), data.get("cut")
    runs: list[tuple[str, int]] = []
    traces: list[tuple[str, bytes, float]] = []
    try:
        if not isinstance(late, dict) or not isinstance(cut, list) or not all(isinstance(c, str) for c in cut):
            raise SnapshotError("late or cut: not of the expected form")
        for entry in late.get("runs", []):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                    and isinstance(entry[1], int) and not isinstance(entry[1], bool)):
                raise SnapshotError("late.runs: expected [run id, next sequence number]")
            runs.append((entry[0], entry[1]))
        for entry in late.get("traces", []):
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                    and isinstance(entry[1], str) and len(entry[1]) == 32):
                raise SnapshotError("late.traces: expected [run id, trace id, age]")
            traces.append((entry[0], bytes.fromhex(entry[1]), _seconds(entry[2])))
    except (SnapshotError, ValueError) as exc:
        _log.error("state dir: %s: the late cache of the last shutdown cannot be used (%s); late spans of runs "
                   "completed before it are judged as cut runs", path, exc)
        return Header([], [], [c for c in cut if isinstance(c, str)] if isinstance(cut, list) else [])
    return Header(runs, traces, list(cut))


def _header_problem(line: str, fp: Fingerprinter) -> Optional[str]:
    try:
        header = json.loads(line)
    except ValueError:
        return "does not start with a snapshot header"
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return "is not an otel-loopguard snapshot of open runs"
    if header.get("version") != VERSION:
        return f"has format version {header.get('version')!r}; this receiver reads version {VERSION}"
    if header.get("key_id") != fp.key_id:
        return f"was written under digest key id {header.get('key_id')!r}, this receiver has {fp.key_id}"
    if header.get("policy") != fp.policy.version:
        return (f"was judged under policy {header.get('policy')!r}, this receiver has {fp.policy.version!r}: "
                "digests need not compare")
    return None


def _reject(path: Path, problem: str, runs: int = 0) -> None:
    aside = path.with_name(path.name + ".rejected")
    _log.error("state dir: %s %s; set aside as %s, its %d runs are not restored (their later spans are judged as "
               "cut runs)", path, problem, aside.name, runs)
    os.replace(path, aside)
