"""One open run in the receiver: its calls reassembled into sequence order.

Calls numbered by the processor (`loopguard.seq`, marked dense) are judged as soon as
the contiguous prefix grows, so findings stream. Calls without a number are held
and judged in start-time order when the run completes; calls whose numbers are not
marked dense (they may skip: 10, 20, 30) are held too and judged in their order. A gap that outlives
`gap_wait` makes the run `incomplete_trace`; judging resumes after the gap,
patterns of calls in a row starting afresh there.
"""

from __future__ import annotations

import bisect
import json
from operator import itemgetter
from types import MappingProxyType
from dataclasses import replace
from typing import Any, Mapping, Optional, Union

from ...bounded import BoundedMap
from ...calls import LOCAL_KEY, TERMINATION_REASONS, GuardEvent, ModelCall, RawCall, RunFacts, ToolCall
from ...conventions.delegations import DelegationLinks
from ...conventions.handoffs import resolve_targets, unresolved
from ...detect import Run
from ...findings import INFO, TOOL_LEVEL_KINDS, WARN, Finding
from ...findings.otlp import MAX_INPUT_CHARS
from ...findings.waste import ModelIndex
from ...fingerprint import Fingerprinter, fingerprint_call
from ...otlp.order import ModelSpanFacts, enclosed_turns, order_calls
from ...score import GuardTrail, feed_in_order, next_seq_after, score_fields
from ..ingest.decode import Candidate, TreeNote

MAX_KEPT_FINDINGS = 1000
MAX_AHEAD = 100_000  # a sequence number this far past the prefix is not a gap, it is bad data
MAX_SKIPPED_RANGES = 1000
MAX_GUARD_EVENTS = 100
MAX_STARTS = 100_000
MAX_AGENT_SPANS = 4096  # the latest agent spans of a run: waiting handoffs' targets
RECENT_CALLS = 1024
# A run's span tree for its delegations (smolagents managed agents), held until it is judged:
# the OpenInference spans' links kept at most, and the candidate calls. Past either bound a
# delegation is not counted (no call), never counted wrongly.
MAX_TREE_LINKS = 2048
MAX_DELEGATIONS = 256
RECENT_ARGUMENTS = 16  # raw arguments of the last few actions, for a finding's input.value
SKEW_TOLERANCE_NS = 1_000_000  # 1 ms: siblings started in one burst may tie


class _Held:
    """What a held call keeps besides its ToolCall: the guard facts the score needs."""

    __slots__ = ("dispatched", "guard")

    def __init__(self, dispatched: bool, guard: Optional[str]):
        self.dispatched = dispatched
        self.guard = guard


_ORDINARY = _Held(True, None)  # shared by every call that no guard touched
_NO_FACTS = RunFacts()
_NO_RECORD: Mapping[str, int] = MappingProxyType({})
_FACT_KEYS = ("loopguard.termination_reason", "loopguard.terminal_response")
MAX_JOURNAL = 20_000  # inputs a run keeps for a snapshot (state_dir); a longer run is cut at shutdown instead


def _key(call: RawCall | ToolCall) -> tuple[Optional[str], Optional[str]]:
    """A held call's identity: span ids are unique only within their trace, and the traces of
    one conversation are one run."""
    return call.trace_id, call.span_id


def _held(facts: "CallFacts | RawCall") -> _Held:
    return _Held(facts.dispatched, facts.guard) if (facts.guard or not facts.dispatched) else _ORDINARY


def _arguments_text(arguments: Any) -> Optional[str]:
    if isinstance(arguments, str):
        return arguments[:MAX_INPUT_CHARS + 1]  # the same object when short: no copy
    try:
        return json.dumps(arguments, ensure_ascii=False, default=str)[:MAX_INPUT_CHARS + 1]
    except (TypeError, ValueError):
        return None


# Shared by every journalled call, never written: only its numbering and guard facts are read
# (an empty dict of its own per call would cost more than the facts).
_NO_IDENTITY: Mapping[str, Any] = {}


class CallFacts(tuple):
    """What _place reads of a call besides its ToolCall (whose seq, tool, span and trace ids are
    the RawCall's): (ok, finished, dispatched, guard, key_id, seq_dense). Few distinct values
    occur, so a journal shares one of these among its calls (interned) instead of keeping a copy
    of each call's RawCall."""

    __slots__ = ()
    ok = property(itemgetter(0))
    finished = property(itemgetter(1))
    dispatched = property(itemgetter(2))
    guard = property(itemgetter(3))
    key_id = property(itemgetter(4))
    seq_dense = property(itemgetter(5))

    def values(self) -> tuple[Any, ...]:
        return tuple(self)


MAX_INTERNED_FACTS = 256  # key ids and guard kinds come from telemetry: the shared table is bounded
_interned: dict[tuple[Any, ...], CallFacts] = {}


def call_facts(values: tuple[Any, ...]) -> CallFacts:
    """The shared CallFacts of these values (ok, finished, dispatched, guard, key_id, seq_dense)."""
    facts = _interned.get(values)
    if facts is None:
        facts = CallFacts(values)
        if len(_interned) < MAX_INTERNED_FACTS:
            _interned[values] = facts
    return facts


def facts_of(raw: RawCall) -> CallFacts:
    return call_facts((raw.ok, raw.finished, raw.dispatched, raw.guard, raw.key_id, raw.seq_dense))


def expanded(call: ToolCall, facts: CallFacts) -> RawCall:
    """A journalled call's facts as the RawCall they came from, without its payloads (what a
    snapshot saves: state/snapshot.py)."""
    return RawCall(seq=call.seq, tool=call.tool, ok=facts.ok, finished=facts.finished, span_id=call.span_id,
                   dispatched=facts.dispatched, guard=facts.guard, key_id=facts.key_id, trace_id=call.trace_id,
                   seq_dense=facts.seq_dense, identity=_NO_IDENTITY)


def compact(op: tuple[Any, ...]) -> tuple[Any, ...]:
    """A journal entry in the form a run keeps: a call's RawCall facts (a snapshot's) shared."""
    if op[0] == "call" and isinstance(op[2], RawCall):
        return ("call", op[1], facts_of(op[2]), op[3])
    return op


def journal_call(raw: RawCall, fp: Fingerprinter) -> tuple[Any, ...]:
    """A call as a run's journal records it (add_call): a late call of a run judged already,
    kept to judge the run again with it (late.py)."""
    if raw.seq < 1 and unresolved(raw):
        return ("handoff", raw)
    text = _arguments_text(raw.arguments) if raw.arguments is not None else None
    return ("call", fingerprint_call(raw, fp), facts_of(raw), text)


def _again(call: ToolCall, seen: set[tuple[Optional[str], Optional[str]]]) -> bool:
    """A late call delivered again after the dedupe table forgot it (its window shrinks under
    memory pressure) is still one call: the first one journalled is judged."""
    if not call.span_id:
        return False
    key = _key(call)
    if key in seen:
        return True
    seen.add(key)
    return False


class RunBuffer:
    def __init__(self, run_id: str, fp: Fingerprinter, now: float, *, first_seq: int = 1, dense_seq: bool = False,
                 journal: bool = False, restored: bool = False):
        self.run_id = run_id
        self._fp = fp
        self.run = Run(run_id, fp.policy)
        self.trail = GuardTrail()
        self.facts = _NO_FACTS  # frozen: replaced, never changed
        self.first_seq = first_seq
        self.next_seq = first_seq  # above 1: a conversation resumed after its run completed
        self._resumed = first_seq > 1
        self.pending: dict[int, tuple[ToolCall, _Held]] = {}
        # RawCall: a handoff held until its target is known (add_call)
        self.untagged: list[tuple[Union[ToolCall, RawCall], _Held]] = []
        self.untagged_models: list[ModelCall] = []
        self.agents: list[tuple[int, str]] = []  # (start, agent) of agent spans, sorted (bounded)
        self.recent: BoundedMap[int, ToolCall] = BoundedMap(RECENT_CALLS)
        # Only arguments that reached the receiver unredacted (so the backend holds them already),
        # cut short: a finding shows what was repeated without copying a payload.
        self.arguments: BoundedMap[str, str] = BoundedMap(RECENT_ARGUMENTS)
        self._args_action = ""  # the action whose arguments were noted last
        self.findings: list[Finding] = []
        # Findings about dropped copies of its spans: not in the journal, so a run judged again
        # after late calls (late.py) keeps them for its score.
        self.noted: list[Finding] = []
        # late.finding_key of each finding sent for the run (None: too many to keep), so a run
        # judged again sends only new ones; set by the assembler as it emits them.
        self.emitted: Optional[set[int]] = set()
        self.shed = False  # judged early to give memory back (assembly.py): not judged again
        self.key_ids: set[str] = set()
        self.gap_since: Optional[float] = None
        self.skipped: list[tuple[int, int]] = []  # [lo, hi) ranges given up on after gap_wait
        self.late_calls = 0
        self.incomplete = False
        self.integrity_error = False
        self.clock_skew = False
        self.skew_events = 0
        self.guard_events: list[GuardEvent] = []
        self._starts: list[int] = []  # start times of executed calls, sorted (bounded)
        self._capped_starts: dict[str, list[int]] = {}  # the same, per tool with a cap (max_calls)
        self.roots: dict[str, str] = {}  # trace id hex -> root span id hex, per trace of the run
        self.root_ended_at: Optional[float] = None
        self.turn_ended_at: Optional[float] = None  # a conversation's trace ended: judge_turn()
        self.last_activity = now
        self.opened_at = now
        self.cut_reason: Optional[str] = None  # a restart cut the run (receiver/runs/restart.py)
        # The run's inputs, in order: for a snapshot at shutdown (snapshot.py; replayed into a new
        # RunBuffer they rebuild this one), and to judge the run again with late calls (late.py).
        # None: not kept (or too long). Calls' facts shared (compact): `journal` shows them whole.
        self._ops: Optional[list[tuple[Any, ...]]] = [] if journal else None
        self.restored = restored  # rebuilt from a snapshot: the restart rule does not apply
        self.first_trace: Optional[str] = None
        self.traces: set[bytes] = set()
        self.waiting_parents: set[bytes] = set()  # parent spans its calls wait for (assembly.py, clock skew)
        self.first_call: Optional[ToolCall] = None
        self.last_call: Optional[ToolCall] = None
        self.tool_calls_seen = 0
        self._last_start = 0
        self._models_seen = 0
        self._tagged = False  # calls carry loopguard.seq: judge as they arrive
        self._dense_seq = dense_seq  # serve --dense-seq: every loopguard.seq is numbered 1..N
        self._sparse_seqs: list[int] = []  # the numbers of held calls that kept their own (may skip)
        self._judged_calls = 0  # held calls judged at earlier turns of a conversation (judge_turn)
        self._judged_model_ends: list[int] = []  # their model spans' end times, for later calls' turns
        # The journal's model decisions indexed for the waste of findings (models()): made at the
        # first finding that asks, then fed only the entries recorded since.
        self._models: Optional[ModelIndex] = None
        self._models_of: Optional[list[tuple[Any, ...]]] = None  # the journal list it was fed from
        self._models_fed = 0  # entries of that journal fed to it
        self._models_policy: Any = None  # the policy whose prices it holds
        # The run's span tree (note_tree), from its first candidate delegation on; None before.
        self._tree: Optional[DelegationLinks[Candidate]] = None

    @property
    def fingerprinter(self) -> Fingerprinter:
        return self._fp

    @property
    def buffered(self) -> int:
        return len(self.pending) + len(self.untagged) + len(self.untagged_models)

    # -- input -----------------------------------------------------------------
    def add_call(self, raw: RawCall, now: float) -> list[Finding]:
        self.last_activity = now
        if raw.seq < 1 and unresolved(raw):
            # A handoff whose target is the agent that acts next: fingerprinted here once the
            # run is ordered and the target known (conventions/handoffs.py), so no key id of
            # its own to check against the run's.
            self.tool_calls_seen += 1
            self.first_trace = self.first_trace or raw.trace_id
            self.untagged.append((raw, _held(raw)))
            if self._ops is not None:
                self._record(("handoff", raw))
            return []
        call = fingerprint_call(raw, self._fp)
        text = None
        if raw.arguments is not None and call.action != self._args_action:  # a loop repeats one: kept once
            text = _arguments_text(raw.arguments)
        facts = facts_of(raw)
        if self._ops is not None:
            self._record(("call", call, facts, text))
        return self._place(call, facts, text, now)

    def _place(self, call: ToolCall, facts: CallFacts, text: Optional[str], now: float) -> list[Finding]:
        """A fingerprinted call into the run, with the facts of its RawCall its digests do not
        carry (its numbering, span and trace ids are the call's)."""
        self.tool_calls_seen += 1
        self.first_trace = self.first_trace or call.trace_id
        held = _held(facts)
        seq = call.seq
        out = self._key_check(facts.key_id, seq)
        if text is not None:
            self.arguments.put(call.action, text)
            self._args_action = call.action
        if seq < 1 or not (facts.seq_dense or self._dense_seq):
            # Payloads are not kept: only the ToolCall and its guard facts. A number not
            # promised dense orders the call but cannot tell a gap from a skip: held too.
            self.untagged.append((call, held))
            return out
        if not self._tagged:
            self._tagged = True
            for model in self.untagged_models:  # decisions seen before the first call
                out += self._keep(self.run.observe_model(model))
            self.untagged_models = []
        if not facts.finished:
            out.append(self._unfinished(call))
        if self._resumed:
            self._resumed = False
            if seq < self.next_seq:
                # Not the conversation going on: its numbering started again (a restarted
                # processor, calls ending out of order) or an old straggler: count from 1.
                self.next_seq = 1
        if any(lo <= seq < hi for lo, hi in self.skipped):
            self.late_calls += 1  # it missed its gap's wait: reported incomplete already
            return out
        if seq < self.next_seq or seq in self.pending:
            return out + [self._conflict(seq, call.span_id, call.tool)]
        if seq > self.next_seq + MAX_AHEAD:
            why = f"sequence {seq} is far beyond the {self.next_seq - 1} calls seen"
            return out + [self._conflict(seq, call.span_id, call.tool, why)]
        self.pending[seq] = (call, held)
        out += self._drain()
        self.gap_since = (self.gap_since or now) if self.pending else None
        return out

    def add_model(self, model: ModelCall, now: float) -> list[Finding]:
        self.last_activity = now
        if self._ops is not None:
            self._record(("model", model))
        self._models_seen += 1
        numbered = replace(model, turn=self._models_seen)
        if not self._tagged:
            self.untagged_models.append(numbered)  # turns are derived at completion
            return []
        return self._keep(self.run.observe_model(numbered))

    def add_agent(self, start_ns: int, agent: str, now: float) -> None:
        """An agent span: the agent that acts after a handoff that started before it, for a
        handoff whose span never names its target (conventions/handoffs.py). Past the bound the
        earliest are forgotten: a handoff that early falls back to the next handoff's source."""
        self.last_activity = now
        bisect.insort(self.agents, (start_ns, agent))
        if len(self.agents) > MAX_AGENT_SPANS:
            del self.agents[0]

    def note_tree(self, span_id: str, parent_id: str, note: TreeNote) -> None:
        """An OpenInference span's place in the run's tree. Kept from the first agent span that
        may be a delegation on: its ancestors, which must list it, end after it (the spans before
        it are its own run's, below it). A run the processor numbers tags its delegations itself."""
        if self._tagged:
            return
        if self._tree is None:
            if note.candidate is None:
                return
            self._tree = DelegationLinks(MAX_TREE_LINKS, MAX_DELEGATIONS)
        self._tree.note(span_id, parent_id, note.kind, note.declared, note.candidate)

    def _delegations(self) -> list[Finding]:
        """The candidates whose manager lists them, held as calls, the tree dropped. Not in a
        run with numbered calls, nor after a turn was judged (they would come after its calls)."""
        tree, self._tree = self._tree, None
        if tree is None or self._tagged or self._judged_calls or any(c.seq >= 1 for c, _ in self.untagged):
            return []
        out: list[Finding] = []
        for pending in tree.calls():
            out += self.add_call(pending.call(), self.last_activity)
        return out

    def note_guards(self, events: list[GuardEvent]) -> None:
        room = MAX_GUARD_EVENTS - len(self.guard_events)
        if self._ops is not None and room > 0:
            self._record(("guards", events[:room]))
        self.guard_events.extend(events[: max(room, 0)])

    def note_facts(self, facts: dict[str, object]) -> None:
        reason = facts.get("loopguard.termination_reason")
        terminal = facts.get("loopguard.terminal_response")
        if self._ops is not None:
            self._record(("facts", {k: v for k, v in facts.items() if k in _FACT_KEYS}))
        if isinstance(reason, str) and reason in TERMINATION_REASONS:
            self.facts = replace(self.facts, termination_reason=reason)
        if isinstance(terminal, bool):
            self.facts = replace(self.facts, terminal_response=terminal)

    # -- snapshots (state_dir) ----------------------------------------------------
    @property
    def journal(self) -> Optional[list[tuple[Any, ...]]]:
        """The run's inputs with each call's facts whole (a RawCall without payloads), as a
        snapshot saves them; None when not kept."""
        if self._ops is None:
            return None
        return [("call", op[1], expanded(op[1], op[2]), op[3]) if op[0] == "call" else op for op in self._ops]

    @journal.setter
    def journal(self, ops: Optional[list[tuple[Any, ...]]]) -> None:
        self._ops = None if ops is None else [compact(op) for op in ops]

    @property
    def ops(self) -> Optional[list[tuple[Any, ...]]]:
        """The journal as kept (calls' facts shared: CallFacts), for late.py to pack; None when
        not kept. Not to be changed."""
        return self._ops

    def models(self) -> ModelIndex:
        """The run's model decisions from its journal, for the waste of its findings
        (findings/waste.py); not known when the journal is not kept or grew too long. Each
        journal entry is read once, however many findings ask."""
        ops, policy = self._ops, self._fp.policy
        if ops is None:
            self._models = self._models_of = None
            return ModelIndex(None, policy.price_for)
        if self._models is None or self._models_of is not ops or self._models_policy is not policy:
            self._models, self._models_of, self._models_fed = ModelIndex((), policy.price_for), ops, 0
            self._models_policy = policy
        index = self._models
        for op in ops[self._models_fed:]:
            if op[0] == "model":
                index.add(op[1])
        self._models_fed = len(ops)
        return index

    def _record(self, op: tuple[Any, ...]) -> None:
        assert self._ops is not None
        if len(self._ops) >= MAX_JOURNAL:
            self._ops = None  # too long to save: cut at shutdown instead (restart.py)
            return
        self._ops.append(op)

    def replay(self, op: tuple[Any, ...], now: float) -> None:
        """One journal entry of a snapshot, applied as it was first: the same inputs in the
        same order give the same state. What it finds was reported before the restart."""
        self._apply(op, now)

    def rejudge(self, ops: list[tuple[Any, ...]], noted: tuple[Finding, ...], now: float) -> list[Finding]:
        """A completed run judged again from the start, on its inputs and the late ones after
        them (late.py), then completed: every finding of the run. The moments its gaps were
        given up are left out (late calls may fill them: complete() reports what is still
        missing); findings about dropped copies (`noted`) are kept for the score."""
        self._keep(list(noted))
        self.noted = list(noted)
        out: list[Finding] = []
        seen: set[tuple[Optional[str], Optional[str]]] = set()
        for op in ops:
            if op[0] == "gap" or (op[0] == "call" and _again(op[1], seen)):
                continue
            out += self._apply(op, now)
        return out + self.complete()

    def _apply(self, op: tuple[Any, ...], now: float) -> list[Finding]:
        kind = op[0]
        if kind == "call":
            op = compact(op)  # a snapshot's entry holds a RawCall
            if self._ops is not None:
                self._record(op)
            return self._place(op[1], op[2], op[3], now)
        if kind == "handoff":
            return self.add_call(op[1], now)
        if kind == "model":
            return self.add_model(op[1], now)
        if kind == "facts":
            self.note_facts(op[1])
            return []
        if kind == "guards":
            self.note_guards(op[1])
            return []
        if kind == "gap":
            return self.expire_gap(float("inf"), 0.0)
        if kind == "turn":
            return self.judge_turn()
        if kind == "cut":
            return self.cut(op[1])
        raise ValueError(f"unknown journal entry {kind!r}")

    # -- judging ---------------------------------------------------------------
    def _drain(self) -> list[Finding]:
        out: list[Finding] = []
        while self.next_seq in self.pending:
            call, raw = self.pending.pop(self.next_seq)
            out += self._judge(call, raw)
            self.next_seq += 1
        return out

    def _remember(self, call: ToolCall) -> None:
        self.recent.put(call.seq, call)
        self.first_call = self.first_call or call
        self.last_call = call

    def _judge(self, call: ToolCall, raw: "_Held") -> list[Finding]:
        self._remember(call)
        if call.start_ns:
            if call.start_ns + SKEW_TOLERANCE_NS < self._last_start:
                self.clock_skew = True  # a later call started before an earlier one
                self.skew_events += 1
            self._last_start = max(self._last_start, call.start_ns)
        self.trail.note(call.seq, call.tool, raw.dispatched, raw.guard, self._fp.policy)
        if not raw.dispatched:
            return []
        self._started(call)
        return self._keep(self.run.observe(call))

    def expire_gap(self, now: float, wait: float) -> list[Finding]:
        """A gap older than `wait`: report it, then judge on after it."""
        if not self.pending or self.gap_since is None or now - self.gap_since < wait:
            return []
        if self._ops is not None:
            self._record(("gap",))
        resume = min(self.pending)
        lo, hi = self.next_seq, resume  # bounded by MAX_AHEAD, never materialised
        if len(self.skipped) < MAX_SKIPPED_RANGES:
            self.skipped.append((lo, hi))
        self.next_seq = resume
        self.gap_since = now if self.pending else None
        self.run.gap()  # no streak is claimed across the missing calls
        out = [self._incomplete(lo, hi)] + self._drain()
        self.gap_since = now if self.pending else None
        return out

    def complete(self) -> list[Finding]:
        """Judge everything still held; the run is over."""
        out = self._delegations()
        while self.pending:
            out += self.expire_gap(float("inf"), 0.0)
        if self._tagged:
            # The processor leaves a handoff whose target it cannot know untagged: it has no
            # place in the run's numbering, and the processor's own calls are judged without it.
            self.untagged = [(c, h) for c, h in self.untagged if not isinstance(c, RawCall)]
        if self.untagged and self._tagged:
            out.append(self._mixed())
        elif self.untagged:
            out += self._judge_untagged()
        return out

    def _mixed(self) -> Finding:
        """Calls without a sequence in a run whose calls have one cannot be placed in it."""
        self.integrity_error = True
        count, self.untagged = len(self.untagged), []
        reason = (
            f"{count} tool calls carry no loopguard.seq in a run whose other calls do "
            "(a service without the processor?): they cannot be ordered, so the run is not scored"
        )
        return self._keep([self._about("integrity_conflict", WARN, 0, reason)])[0]

    def _drop_redelivered(self) -> None:
        """A span delivered again after the dedupe table forgot it (its window is bounded, and
        shrinks under memory pressure) is still one call: the first one held is kept."""
        seen: set[object] = set()
        kept = []
        for call, h in self.untagged:
            key = (call.trace_id, call.span_id) if call.span_id else id(call)
            if key not in seen:
                seen.add(key)
                kept.append((call, h))
        self.untagged = kept

    def _judge_untagged(self) -> list[Finding]:
        self._drop_redelivered()
        held = {_key(call): h for call, h in self.untagged}
        numbered = [call.seq for call, _ in self.untagged if call.seq >= 1]
        if len(numbered) == len(self.untagged) and len(set(numbered)) < len(numbered):
            twice = min(s for s in numbered if numbered.count(s) > 1)
            self.untagged = []
            return [self._conflict(twice, tool="")]
        calls = self._ordered(final=True)
        if numbered and len(numbered) == len(self.untagged):  # order_calls kept their numbers
            self._sparse_seqs = [c.seq for c in calls]
        self.untagged = []
        return self._feed(calls, held)

    def judge_turn(self) -> list[Finding]:
        """One user turn of a run keyed by a conversation ended (its trace's root span): the
        calls held so far are judged now, not at the idle timeout, and the run goes on. Only
        calls without any number (numbered ones are judged in their own order at completion).
        A handoff whose target is the agent that acts next waits, with what follows it, for the
        next turn or the run's completion."""
        if self._tagged or not self.untagged or any(call.seq >= 1 for call, _ in self.untagged):
            return []
        if self._ops is not None:
            self._record(("turn",))
        self._drop_redelivered()
        held = {_key(call): h for call, h in self.untagged}
        calls = self._ordered(final=False)
        ready = {_key(c) for c in calls}
        self.untagged = [(c, h) for c, h in self.untagged if _key(c) not in ready]
        return self._feed(calls, held)

    def _ordered(self, final: bool) -> list[ToolCall]:
        """The held calls in sequence order after those judged at earlier turns, fingerprinted;
        unless `final`, up to the first handoff still waiting for its target."""
        held, ends = enclosed_turns([call for call, _ in self.untagged], self._model_facts())
        ordered = resolve_targets(order_calls(held, ends), self.agents)
        if not final:
            waiting = next((i for i, c in enumerate(ordered) if isinstance(c, RawCall) and unresolved(c)), None)
            ordered = ordered[:waiting]
        offset = self._judged_calls
        self._judged_calls += len(ordered)
        calls = [fingerprint_call(c, self._fp) if isinstance(c, RawCall) else c for c in ordered]
        return [c.renumbered(c.seq + offset, c.turn) for c in calls] if offset else calls

    def _model_facts(self) -> list[ModelSpanFacts]:
        """The run's model spans as enclosed_turns reads them: those judged at earlier turns by
        their end only; an OpenInference LLM span held with its record (decode.py) by its id too."""
        facts: list[ModelSpanFacts] = [("", end, _NO_RECORD) for end in self._judged_model_ends]
        facts += [(m.span_id or "", m.end_ns or 0, m.requested or _NO_RECORD) for m in self.untagged_models]
        return facts

    def _feed(self, calls: list[ToolCall], held: dict[tuple[Optional[str], Optional[str]], "_Held"]) -> list[Finding]:
        executed = []
        for call in calls:
            h = held[_key(call)]
            self._remember(call)
            self.trail.note(call.seq, call.tool, h.dispatched, h.guard, self._fp.policy)
            if h.dispatched:
                executed.append(call)
                self._started(call)
        models, self.untagged_models = self.untagged_models, []
        if len(self._judged_model_ends) < MAX_STARTS:
            self._judged_model_ends += [m.end_ns or 0 for m in models]
        return self._keep(feed_in_order(self.run, models, executed))

    def _started(self, call: ToolCall) -> None:
        if call.start_ns and len(self._starts) < MAX_STARTS:
            bisect.insort(self._starts, call.start_ns)
            if self._fp.policy.rule(call.tool).max_calls is not None:
                bisect.insort(self._capped_starts.setdefault(call.tool, []), call.start_ns)

    def _guards_to_trail(self) -> None:
        """Guard decisions known only as span events: placed by time among the calls. A cap's
        decision refuses its tool only: only that tool's later calls ran after it."""
        for e in self.guard_events:
            before = bisect.bisect_right(self._starts, e.time_ns)
            after = len(self._starts) - before
            if e.kind in TOOL_LEVEL_KINDS:
                starts = self._capped_starts.get(e.tool or "", [])
                after = len(starts) - bisect.bisect_right(starts, e.time_ns)
            self.trail.note_event(before + 0.5, e.kind, e.dispatched, after)

    def score(self) -> tuple[str, dict[str, object]]:
        unscorable: dict[str, object] = {"scorable": False, "release": None, "termination_reason": self.facts.termination_reason}
        if self.integrity_error:
            return "integrity_error", unscorable
        if self.incomplete:
            return "incomplete_trace", unscorable
        self._guards_to_trail()
        after = next_seq_after(self._sparse_seqs) if self._sparse_seqs else None  # else n + 1
        return "scored", score_fields(self.run.summary, self.findings, self.trail, self.facts, after)

    # -- integrity findings ----------------------------------------------------
    def _key_check(self, raw_key_id: Optional[str], seq: int) -> list[Finding]:
        key_id = self._fp.key_id if raw_key_id == LOCAL_KEY else raw_key_id
        if key_id is None or key_id in self.key_ids or len(self.key_ids) >= 2:
            return []  # two ids already make the run an integrity error; no need for more
        self.key_ids.add(key_id)
        if len(self.key_ids) != 2:
            return []
        self.integrity_error = True
        reason = f"digests under different key ids ({', '.join(sorted(self.key_ids))}) cannot be compared"
        return self._keep([self._about("integrity_conflict", WARN, seq, reason)])

    def _conflict(self, seq: int, span_id: Optional[str] = None, tool: Optional[str] = None,
                  why: Optional[str] = None) -> Finding:
        self.integrity_error = True
        reason = why or f"two different calls claim sequence {seq}: the dispatch order is unknown"
        return self._keep([self._about("integrity_conflict", WARN, seq, reason, span_id, tool)])[0]

    def _incomplete(self, lo: int, hi: int) -> Finding:
        self.incomplete = True
        shown = ", ".join(map(str, range(lo, min(hi, lo + 10)))) + (" ..." if hi - lo > 10 else "")
        reason = f"calls {shown} never arrived: progress across the gap cannot be judged"
        f = Finding(kind="incomplete_trace", severity=WARN, first_seq=lo, last_seq=hi - 1, count=hi - lo, seqs=(),
                    span_ids=(), reason=reason)
        return self._keep([f.stamped(self.run_id, self._fp.policy.version)])[0]

    def cut(self, reason: str) -> list[Finding]:
        """A receiver restart cut the run (receiver/runs/restart.py): unscorable, said once."""
        if self.cut_reason is not None:
            return []
        self.cut_reason, self.incomplete = reason, True
        if self._ops is not None:
            self._record(("cut", reason))
        return self._keep([self._about("incomplete_trace", WARN, 0, reason)])

    def cut_short(self, reason: str) -> Finding:
        """The run is judged now, on what arrived, before it completed (the receiver needed its
        memory back): never scored as passing, and the finding says why."""
        self.incomplete = True
        return self._keep([self._about("incomplete_trace", WARN, 0, reason)])[0]

    def _unfinished(self, call: ToolCall) -> Finding:
        self.incomplete = True
        reason = f"call {call.seq or '?'} started but never finished: its result is unknown"
        return self._keep([self._about("incomplete_trace", WARN, max(call.seq, 0), reason, call.span_id, call.tool)])[0]

    def span_conflict(self, span_id: str, seq: int, tool: Optional[str] = None) -> Finding:
        reason = f"a different span arrived under span id {span_id}; the first one is kept and judged"
        return self._note(self._about("integrity_conflict", WARN, seq, reason, span_id, tool))

    def telemetry_duplicate(self, span_id: str, seq: int, tool: Optional[str] = None) -> Finding:
        reason = f"span {span_id} was delivered more than once; counted once (a telemetry retry, not a repeated call)"
        return self._note(self._about("telemetry_duplicate", INFO, seq, reason, span_id, tool))

    def _note(self, f: Finding) -> Finding:
        if len(self.noted) < MAX_KEPT_FINDINGS:
            self.noted.append(f)
        return self._keep([f])[0]

    def _about(self, kind: str, severity: str, seq: int, reason: str, span_id: Optional[str] = None,
               tool: Optional[str] = None) -> Finding:
        """A finding about one span (and its tool, when it is a call); seq 0 when the span
        carried no sequence number."""
        spans = (span_id,) if span_id else ()
        seqs = (seq,) if (seq or span_id) else ()
        f = Finding(kind=kind, severity=severity, first_seq=seq, last_seq=seq, count=1, seqs=seqs,
                    span_ids=spans if seqs else (), reason=reason, tool=tool or None)
        return f.stamped(self.run_id, self._fp.policy.version)

    def _keep(self, found: list[Finding]) -> list[Finding]:
        room = MAX_KEPT_FINDINGS - len(self.findings)
        if room > 0:
            self.findings.extend(found[:room])
        return found
