"""NDJSON tool-call records -> runs. Every problem names the file and the line.

One JSON object a line. Tool calls need `sequence`, `call_id`, `tool`,
`arguments`, `observation`; optional `run_id`, `turn`, `ok`, `span_id`,
`finished`, `dispatched`, `guard`, `start_ns`, `end_ns`. The default run id
is the file path as given. Lines with
`"record": "run"` or `"record": "model"` carry how the run ended and model
decisions (docs/audit.md). Unknown fields are ignored.

A `sequence` orders the calls as the runtime dispatched them; numbers may skip
(10, 20, 30). Only a run record with `"dense_sequence": true` (or the audit's
`--dense-seq`) promises 1..N, so that a gap is a missing call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

from ..calls import TERMINATION_REASONS, ModelCall, RawCall, RunFacts
from ..errors import InputError
from .runs import RunBuilder

REQUIRED = ("sequence", "call_id", "tool", "arguments", "observation")


class _Line:
    def __init__(self, path: Path, number: int, record: dict[str, Any]):
        self.where = f"{path}:{number}"
        self.record = record

    def error(self, message: str) -> InputError:
        return InputError(f"{self.where}: {message}")

    def get(self, name: str, check: Callable[[Any], bool], expected: str, default: Any = None) -> Any:
        if name not in self.record or self.record[name] is None:
            return default
        value = self.record[name]
        if not check(value):
            raise self.error(f"field '{name}' must be {expected}, got {json.dumps(value)[:80]}")
        return value


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def parse_json(path: Path, number: int, text: str) -> Any:
    """JSON text of a file (`number` 0) or of its line `number`; errors say where."""
    where = f"{path}:{number}" if number else str(path)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where}: not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply to read") from None


def read_ndjson(path: Path, text: str, runs: RunBuilder) -> None:
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        record = parse_json(path, number, raw)
        if not isinstance(record, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        _read_line(_Line(path, number, record), path, runs)


def _read_line(line: _Line, path: Path, runs: RunBuilder) -> None:
    kind = line.record.get("record", "call")
    # Default run id: the file as named, so same-named files in two folders stay apart.
    run_id = line.get("run_id", _is_str, "a non-empty string", default=str(path))
    if kind == "call":
        runs.add_call(run_id, _call(line))
    elif kind == "run":
        runs.set_facts(run_id, _facts(line))
        if line.get("dense_sequence", _is_bool, "true or false", default=False):
            runs.set_dense(run_id)
    elif kind == "model":
        runs.add_model(run_id, _model(line))
    else:
        raise line.error(f"unknown record type {kind!r} (expected call, run or model)")


def _call(line: _Line) -> RawCall:
    for name in REQUIRED:
        if name not in line.record:
            raise line.error(f"missing field '{name}'")
    seq = line.get("sequence", lambda v: _is_int(v) and v >= 1, "an integer >= 1")
    call_id = line.record["call_id"]
    if not (_is_str(call_id) or _is_int(call_id)):
        raise line.error("field 'call_id' must be a string or an integer")
    return RawCall(
        seq=seq,
        tool=line.get("tool", _is_str, "a non-empty string"),
        arguments=line.record["arguments"],
        result=line.record["observation"],
        ok=line.get("ok", _is_bool, "true or false", default=True),
        finished=line.get("finished", _is_bool, "true or false", default=True),
        turn=line.get("turn", lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
        call_id=str(call_id),
        span_id=line.get("span_id", _is_str, "a non-empty string"),
        start_ns=line.get("start_ns", _is_int, "an integer"),
        end_ns=line.get("end_ns", _is_int, "an integer"),
        dispatched=line.get("dispatched", _is_bool, "true or false", default=True),
        guard=line.get("guard", _is_str, "a finding kind"),
    )


def _facts(line: _Line) -> RunFacts:
    reason: Optional[str] = line.get(
        "termination_reason",
        lambda v: v in TERMINATION_REASONS,
        "one of " + ", ".join(TERMINATION_REASONS),
        default="unknown",
    )
    return RunFacts(
        termination_reason=reason or "unknown",
        terminal_response=line.get("terminal_response", _is_bool, "true or false"),
    )


def _model(line: _Line) -> ModelCall:
    if "turn" not in line.record:
        raise line.error("missing field 'turn'")
    nonneg = lambda v: _is_int(v) and v >= 0  # noqa: E731
    return ModelCall(
        turn=line.get("turn", nonneg, "an integer >= 0"),
        input_tokens=line.get("input_tokens", nonneg, "an integer >= 0", default=0),
        output_tokens=line.get("output_tokens", nonneg, "an integer >= 0", default=0),
        model=line.get("model", _is_str, "a non-empty string"),
    )
