"""Collects calls, model decisions and run facts per run id across input files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..calls import GuardEvent, ModelCall, RawCall, RecordedDecision, RunFacts
from ..score import RunInput


@dataclass
class _Pending:
    calls: list[RawCall] = field(default_factory=list)
    models: list[ModelCall] = field(default_factory=list)
    facts: RunFacts = RunFacts()
    guards: list[GuardEvent] = field(default_factory=list)
    decisions: list[RecordedDecision] = field(default_factory=list)
    dense: bool = False


class RunBuilder:
    def __init__(self) -> None:
        self._runs: dict[str, _Pending] = {}
        self.tool_calls = 0  # calls added so far (the audit says which files held none)
        self.source: Optional[Path] = None  # the file being read: its records' runs note it
        self.sources: dict[str, dict[Path, None]] = {}  # run id -> the files it has records in, in order

    def _run(self, run_id: str) -> _Pending:
        if self.source is not None:
            self.sources.setdefault(run_id, {})[self.source] = None
        return self._runs.setdefault(run_id, _Pending())

    def add_call(self, run_id: str, call: RawCall) -> None:
        self._run(run_id).calls.append(call)
        self.tool_calls += 1

    def add_model(self, run_id: str, model: ModelCall) -> None:
        self._run(run_id).models.append(model)

    def set_facts(self, run_id: str, facts: RunFacts) -> None:
        self._run(run_id).facts = facts

    def set_dense(self, run_id: str) -> None:
        """The run's records promise sequence numbers 1..N with no gap."""
        self._run(run_id).dense = True

    def add_guards(self, run_id: str, events: list[GuardEvent]) -> None:
        self._run(run_id).guards.extend(events)

    def add_decisions(self, run_id: str, decisions: list[RecordedDecision]) -> None:
        self._run(run_id).decisions.extend(decisions)

    def runs(self, dense: bool = False) -> list[RunInput]:
        """`dense`: every run's sequence is numbered 1..N (the audit's --dense-seq)."""
        return [RunInput(run_id=rid, calls=p.calls, models=p.models, facts=p.facts, guard_events=p.guards,
                         dense_seq=dense or p.dense, decisions=p.decisions) for rid, p in self._runs.items()]
