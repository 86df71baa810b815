"""Runs judged already, kept so that calls arriving after their judgement are judged too.

A run completes when its root span has ended plus root_grace_seconds, or when idle; calls
may still come after that (a Collector's retry after its backoff, an exporter's queue
draining). Such late inputs wait here, per run, root_grace_seconds from the first of them
(those that come meanwhile join it); then the run is judged again from all its inputs
(assembly.py): findings the late calls
complete are emitted, never one emitted before, and the summary is issued again as a
revision of the first. What a run keeps for this is the journal a snapshot saves (buffer.py):
its fingerprinted inputs, in order, packed into one block of bytes (`Inputs`): objects made all
through a burst and kept after it would pin the heap's pages after they go, as long as they
are many small objects (receiver/ops/trim.py).

Bounded: the verdicts of completed runs are kept for late_cache_seconds, and at most
`max_runs` of them and `max_entries` journal entries in all, the oldest going first (a run
whose journal went can no longer be judged again); a run is judged again at most
MAX_REVISIONS times. Past either bound, late calls mark the run's verdict partial in one new
summary instead (assembly.py), and later ones are counted only. Each entry is added once and
dropped once, and a run is judged at most 1 + MAX_REVISIONS times: O(1) amortised per input.
"""

from __future__ import annotations

import pickle
from collections import deque
from dataclasses import fields
from operator import attrgetter
from typing import Any, Hashable, Optional

from ...calls import NO_EQUIVALENCE, Equivalence, Evidence, ModelCall, ToolCall
from ...findings import Finding
from ...fingerprint import Fingerprinter
from ...progress.evidence import NO_EVIDENCE
from .buffer import MAX_JOURNAL, CallFacts, call_facts

MAX_REVISIONS = 3  # summaries after the first: judging a run again costs its whole journal
# What a kept verdict and a journal entry cost, in entries of the assembler's side tables
# (budget.SIDE_ENTRY_BYTES each): a verdict's record and maps, a call's ToolCall and facts.
VERDICT_COST, ENTRY_COST = 3, 3
Op = tuple[Any, ...]  # a journal entry (buffer.py)


def finding_key(f: Finding) -> int:
    """What makes a finding the same one when a run is judged again: its kind, severity and
    tool, and the spans it names (their seq numbers when it names none: a gap, a budget)."""
    where: tuple[Any, ...] = tuple(f.span_ids) if any(f.span_ids) else (f.first_seq, f.last_seq, f.reason)
    return hash((f.kind, f.severity, f.tool, f.action, where))


class Inputs:
    """What judging a completed run again needs, packed: its journal, the keys of the findings
    sent, the findings about dropped copies, its agent spans and roots. Only this process packs
    and unpacks it, in memory (nothing read from outside is ever unpickled). Calls and model
    calls go in as tuples of their fields (`packed_op`): pickling the records themselves runs
    Python code per field, and every completed run is packed."""

    __slots__ = ("blob", "count")

    def __init__(self, journal: list[Op], emitted: set[int], noted: tuple[Finding, ...],
                 agents: tuple[tuple[int, str], ...], roots: dict[str, str]):
        packed = [packed_op(op) for op in journal]
        self.blob = pickle.dumps((packed, emitted, noted, agents, roots), protocol=pickle.HIGHEST_PROTOCOL)
        self.count = len(journal)  # what the bound counts

    def unpacked(self) -> tuple[list[Op], set[int], tuple[Finding, ...], tuple[tuple[int, str], ...], dict[str, str]]:
        packed, emitted, noted, agents, roots = pickle.loads(self.blob)  # noqa: S301 (packed by this process, above)
        return [unpacked_op(op) for op in packed], emitted, noted, agents, roots


# The fields of the records a journal holds, in a fixed order: a call packs as plain tuples.
_NESTED = ("evidence", "equivalence", "flags")
_CALL_FIELDS = tuple(f.name for f in fields(ToolCall) if f.name not in _NESTED)
_EVIDENCE_FIELDS = tuple(f.name for f in fields(Evidence))
_EQUIVALENCE_FIELDS = tuple(f.name for f in fields(Equivalence))
_MODEL_FIELDS = tuple(f.name for f in fields(ModelCall))
_call_values, _evidence_values = attrgetter(*_CALL_FIELDS), attrgetter(*_EVIDENCE_FIELDS)
_equivalence_values, _model_values = attrgetter(*_EQUIVALENCE_FIELDS), attrgetter(*_MODEL_FIELDS)


def packed_op(op: Op) -> Op:
    """A journal entry as plain values: a call's records as tuples of their fields (the shared
    evidence and equivalence of most calls as None), a model call's as a tuple; others as they are."""
    kind = op[0]
    if kind == "call" and isinstance(op[2], CallFacts):
        call: ToolCall = op[1]
        evidence = None if call.evidence is NO_EVIDENCE else _evidence_values(call.evidence)
        eq = None if call.equivalence is NO_EQUIVALENCE else _equivalence_values(call.equivalence)
        return ("call*", _call_values(call), evidence, eq, tuple(call.flags), op[2].values(), op[3])
    if kind == "model":
        return ("model*", _model_values(op[1]))
    return op


def unpacked_op(op: Op) -> Op:
    """`packed_op` undone: records equal to those packed."""
    kind = op[0]
    if kind == "call*":
        _, values, evidence, eq, flags, facts, text = op
        call = ToolCall(**dict(zip(_CALL_FIELDS, values)),
                        evidence=NO_EVIDENCE if evidence is None else Evidence(**dict(zip(_EVIDENCE_FIELDS, evidence))),
                        equivalence=NO_EQUIVALENCE if eq is None else Equivalence(**dict(zip(_EQUIVALENCE_FIELDS, eq))),
                        flags=frozenset(flags))
        return ("call", call, call_facts(facts), text)
    if kind == "model*":
        return ("model", ModelCall(**dict(zip(_MODEL_FIELDS, op[1]))))
    return op


class Verdict:
    """A completed run as its late calls need it: how to judge it again and what was said."""

    __slots__ = ("key", "run_id", "completed_at", "fp", "first_seq", "dense_seq", "journal", "first_trace",
                 "first_root", "clock_skew", "summary_id", "summaries", "late_calls", "late", "pending_calls", "due",
                 "partial")

    def __init__(self, *, key: Hashable, run_id: str, completed_at: float, fp: Fingerprinter, first_seq: int = 1,
                 dense_seq: bool = False, journal: Optional[Inputs] = None, first_trace: Optional[str] = None,
                 first_root: Optional[str] = None, clock_skew: bool = False, summary_id: Optional[bytes] = None):
        # One completion of a run (a conversation completes several runs of one id); a run known
        # only from its trace (judged before a restart, or forgotten): (run id, trace id).
        self.key = key
        self.run_id = run_id
        self.completed_at = completed_at
        self.fp = fp  # the policy and key the run was judged with (a reload does not change them)
        self.first_seq = first_seq
        self.dense_seq = dense_seq
        self.journal = journal  # None: cannot be judged again (evicted, too long, shed, or a bug)
        self.first_trace = first_trace  # where a summary marking it partial goes: this trace's root
        self.first_root = first_root
        self.clock_skew = clock_skew
        self.summary_id = summary_id  # the first summary's span id (None: none was sent)
        self.summaries = 1 if summary_id else 0
        self.late_calls = 0  # late tool calls judged in or marked on a summary so far
        self.late: list[Op] = []  # late inputs not yet judged
        self.pending_calls = 0  # tool calls among them
        self.due: Optional[float] = None  # when to judge them: root_grace_seconds after the first
        self.partial = False  # a summary marked the verdict partial: later calls are counted only

    @property
    def size(self) -> int:
        return (self.journal.count if self.journal is not None else 0) + len(self.late)


class LateRuns:
    """The verdicts of completed runs, oldest first, with the late inputs waiting for each."""

    def __init__(self, *, max_runs: int, max_entries: int, seconds: float):
        self._verdicts: dict[Hashable, Verdict] = {}  # insertion order: completion order
        self._journaled: deque[Verdict] = deque()  # verdicts holding a journal, oldest first
        self._waiting: dict[Hashable, Verdict] = {}  # verdicts with late inputs to judge
        self._max_runs = max_runs
        self._max_entries = max_entries
        self._seconds = seconds
        self.entries = 0  # journal entries and late inputs held, over all verdicts

    def add(self, verdict: Verdict) -> None:
        old = self._verdicts.pop(verdict.key, None)
        if old is not None:
            self._forget(old)
        self._verdicts[verdict.key] = verdict
        self.entries += verdict.size
        if verdict.journal is not None:
            self._journaled.append(verdict)
        while len(self._verdicts) > self._max_runs:
            self._forget(self._verdicts.pop(next(iter(self._verdicts))))
        self._trim_journals()

    def get(self, key: Hashable) -> Optional[Verdict]:
        return self._verdicts.get(key)

    def note(self, verdict: Verdict, ops: list[Op], calls: int, due: float) -> None:
        """Late inputs of a run: judged together once root_grace_seconds passed after the first."""
        if verdict.partial:
            return  # marked partial already: counted only (late_spans_total)
        verdict.pending_calls += calls
        if verdict.journal is not None and verdict.size + len(ops) > MAX_JOURNAL:
            self._drop_journal(verdict)  # as an open run that long: marked, not judged again
        if verdict.journal is not None:  # else only counted: the run can be marked, not judged again
            verdict.late += ops
            self.entries += len(ops)
        if verdict.due is None:
            verdict.due = due
            self._waiting[verdict.key] = verdict
        self._trim_journals()

    def due(self, now: float) -> list[Verdict]:
        """The verdicts whose late inputs are to be judged now (all of them at `now` = inf)."""
        ready = [v for v in self._waiting.values() if v.due is not None and v.due <= now]
        for v in ready:
            del self._waiting[v.key]
        return ready

    def taken(self, verdict: Verdict) -> tuple[list[Op], int]:
        """A verdict's late inputs and their tool calls, handed over to be judged."""
        ops, calls = verdict.late, verdict.pending_calls
        verdict.late, verdict.pending_calls, verdict.due = [], 0, None
        self.entries -= len(ops)
        return ops, calls

    def rejournal(self, verdict: Verdict, journal: Inputs) -> None:
        """A verdict judged again keeps its inputs and the late ones for the next time."""
        if verdict.journal is None:
            return  # dropped meanwhile (the entry bound)
        self.entries += journal.count - verdict.journal.count
        verdict.journal = journal
        self._trim_journals()

    def drop_stale(self, now: float) -> None:
        """Verdicts older than late_cache_seconds go (their runs' late spans open new runs then)."""
        while self._verdicts:
            oldest = next(iter(self._verdicts.values()))
            if now - oldest.completed_at < self._seconds:
                break
            self._forget(self._verdicts.pop(oldest.key))
        self._trim_journals()

    def __len__(self) -> int:
        return len(self._verdicts)

    @property
    def side_entries(self) -> int:
        """What this holds, counted as the memory bound counts side-table entries."""
        return len(self._verdicts) * VERDICT_COST + self.entries * ENTRY_COST

    def release(self, verdict: Verdict) -> None:
        """A verdict marked partial keeps nothing but its record."""
        self._drop_journal(verdict)

    def _forget(self, verdict: Verdict) -> None:
        self.entries -= verdict.size
        verdict.journal, verdict.late = None, []
        self._waiting.pop(verdict.key, None)

    def _drop_journal(self, verdict: Verdict) -> None:
        self.entries -= verdict.size
        verdict.journal, verdict.late = None, []

    def _trim_journals(self) -> None:
        """Past the entry bound the oldest journals go: their runs can be marked, not judged
        again. Verdicts already forgotten leave the front of the line as they are met."""
        journaled = self._journaled
        while journaled and (journaled[0].journal is None or self.entries > self._max_entries):
            verdict = journaled.popleft()
            if verdict.journal is not None:
                self._drop_journal(verdict)
