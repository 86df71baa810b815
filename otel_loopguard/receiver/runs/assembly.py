"""Routes decoded spans to their runs, runs timers, and completes runs.

A run is complete when its root span has ended plus a grace period, or after
an idle timeout. Spans of a run that was already completed are "late": they are
forwarded and counted, and the run is judged again with its late calls (late.py):
new findings, and a summary that revises the first; past the bound, a summary that
marks the first verdict partial. After `late_cache_seconds` the run id may open a
new run (a conversation that resumes later).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterator, Optional

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ...bounded import BoundedMap
from ...conventions import attributes as conv
from ...findings import WARN, Finding
from ...findings.otlp import Placement, finding_span, place, place_at, run_span
from ...findings.waste import WASTE_KINDS, ModelIndex, RunTotals, finding_waste, run_totals, run_waste
from ...fingerprint import Fingerprinter
from ..ops.budget import side_table_entries, working_bytes
from ..config import ReceiverConfig
from ..ingest.decode import Decoded
from ..ops.metrics import Metrics
from .restart import CUT_AT_SHUTDOWN, RestartRule
from .buffer import MAX_KEPT_FINDINGS, RunBuffer, journal_call
from .late import ENTRY_COST, MAX_REVISIONS, VERDICT_COST, Inputs, LateRuns, Op, Verdict, finding_key

_log = logging.getLogger("otel_loopguard.receiver")
MAX_ROOTS = 100_000
MAX_PARENT_CHECKS = 100_000
MAX_TOOL_LABELS = 100
MAX_ROOTS_PER_RUN = 64
MAX_CHILDREN_WAITING = 64  # tool calls waiting for one parent span to check their times


class RunAssembler:
    def __init__(
        self,
        fp: Fingerprinter,
        config: ReceiverConfig,
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.monotonic,
        journal_runs: bool = False,
        on_complete: Optional[Callable[[str], None]] = None,
    ):
        """Runs keep their inputs (a journal): for a snapshot with a state_dir (snapshot.py; that is
        what `journal_runs` says), and to be judged again with late calls (late.py);
        `on_complete` is told of every completed run (judged.py)."""
        self._fp = fp
        self._config = config
        self._metrics = metrics
        self._clock = clock
        self.runs: dict[str, RunBuffer] = {}
        self.buffered_calls = 0  # kept up to date as runs change, never recounted
        self.open_calls = 0  # tool calls the open runs have seen (their detector state grows with them)
        self.runs_shed = 0  # open runs judged early to give their memory back (shed())
        self._trace_runs: dict[bytes, set[str]] = {}
        side = side_table_entries(working_bytes(config.memory_limit_mib))  # each within the memory bound too
        self._roots: BoundedMap[bytes, tuple[str, float]] = BoundedMap(min(MAX_ROOTS, side))  # trace -> (root id, ended at)
        # run (of one trace) -> the tool calls its root span says the processor numbered; kept
        # past completion so that a revision with late calls compares again
        self._counted: BoundedMap[str, int] = BoundedMap(min(MAX_ROOTS, side))
        # Completed runs: each (run, trace) they covered (its late spans are forwarded, and judged
        # with that run again: late.py; another run sharing the trace is not affected), and where
        # each run's sequence stopped (a conversation may resume in a new trace).
        # The value: when the run completed, and its verdict's key in the late runs (0: none).
        self._completed_traces: BoundedMap[tuple[str, bytes], tuple[float, int]] = BoundedMap(
            min(config.late_cache_size, side))
        self._verdicts_made = 0  # keys of the late runs' verdicts: a conversation completes several runs
        self._completed: BoundedMap[str, int] = BoundedMap(min(config.late_cache_size, side))
        # Keyed by trace id + span id: span ids need only be unique within their trace.
        self._children: BoundedMap[bytes, list[tuple[str, int, int]]] = BoundedMap(min(MAX_PARENT_CHECKS, side))
        # Times of spans that may be a later tool call's parent (those of traces with calls),
        # and when they came.
        self._spans_seen: BoundedMap[bytes, tuple[int, int, float]] = BoundedMap(min(MAX_PARENT_CHECKS, side))
        self._tool_labels: set[str] = set()
        # Completed runs, to judge again with their late calls: within the side tables' share.
        self._late = LateRuns(max_runs=min(config.late_cache_size, side // VERDICT_COST),
                              max_entries=side // ENTRY_COST, seconds=config.late_cache_seconds)
        self.restart: Optional[RestartRule] = None  # restored(): when a state_dir knows a predecessor
        self.journal_runs = journal_runs
        self.on_complete = on_complete

    @classmethod
    def restored(cls, fp: Fingerprinter, config: ReceiverConfig, metrics: Metrics, *,
                 restore: Callable[[RunAssembler], RestartRule],
                 on_complete: Optional[Callable[[str], None]] = None) -> RunAssembler:
        """An assembler that goes on where a previous process stopped (state_dir), its runs kept
        for a snapshot: `restore` feeds it what that process left and returns the rule for runs
        its restart cut, which applies from then on, not to the runs it rebuilt (restart.py)."""
        assembler = cls(fp, config, metrics, journal_runs=True, on_complete=on_complete)
        assembler.restart = restore(assembler)
        return assembler

    @property
    def fingerprinter(self) -> Fingerprinter:
        return self._fp

    def use(self, fp: Fingerprinter) -> None:
        """A reloaded policy: runs opened from now on are judged by it. An open run keeps the
        fingerprinter it started with, so its findings bear the version that judged them."""
        self._fp = fp

    # -- input -------------------------------------------------------------------
    def accept(self, spans: list[Decoded], calls_here: Optional[bool] = None) -> list[Span]:
        """`calls_here`: whether the request these spans are part of holds tool calls (a large
        request is accepted in pieces); by default, whether these spans do."""
        now = self._clock()
        out: list[Span] = []
        if calls_here is None:
            calls_here = any(d.call is not None for d in spans)
        for d in spans:
            try:
                out += self._accept_one(d, now, calls_here)
            except Exception:  # one bad span must not cost the others their judgement
                self._metrics.inc("internal_errors_total")
                _log.exception("could not judge span %s of trace %s", d.span_id.hex(), d.trace_id.hex())
        self._note_trees(spans)
        self._metrics.set_gauge("buffered_calls", self.buffered_calls)
        return out

    def _accept_one(self, d: Decoded, now: float, calls_here: bool) -> list[Span]:
        self._touch(d, now, calls_here)
        if d.run_id is None:
            return []
        buffer = self._run(d.run_id, d.trace_id, now)
        if buffer is None:
            self._metrics.inc("late_spans_total")
            self._late_input(d, now)
            return []
        before = buffer.buffered
        cut = self._cut_by_restart(buffer, d)
        found: list[Finding] = []
        if d.call is not None:
            self._watch_parent(d, buffer)
            found = buffer.add_call(d.call, now)
            self.open_calls += 1
        elif d.model is not None:
            found = buffer.add_model(d.model, now)
        elif d.agent is not None:
            buffer.add_agent(d.start, d.agent, now)
        if d.facts:
            buffer.note_facts(d.facts)
            self._note_counted(buffer, d)
        if d.guards:
            buffer.note_guards(d.guards)
        self.buffered_calls += buffer.buffered - before
        return cut + self._emit(buffer, found)

    def _note_trees(self, spans: list[Decoded]) -> None:
        """The OpenInference spans into their open runs' span trees (delegations), after the
        request's other spans opened the runs: a tree note never opens one."""
        for d in spans:
            note = d.tree
            buffer = self.runs.get(note.run_id) if note is not None else None
            if note is not None and buffer is not None:
                try:
                    buffer.note_tree(d.span_id.hex(), d.parent.hex(), note)
                except Exception:  # one bad span must not cost the others their judgement
                    self._metrics.inc("internal_errors_total")
                    _log.exception("could not place span %s of trace %s", d.span_id.hex(), d.trace_id.hex())

    def _cut_by_restart(self, buffer: RunBuffer, d: Decoded) -> list[Span]:
        """receiver/runs/restart.py, rule 2: a run under way before this process started."""
        if (self.restart is None or buffer.cut_reason is not None or buffer.restored
                or not self.restart.cut(buffer.opened_at, d.start, buffer.run_id)):
            return []
        self._metrics.inc("runs_cut_by_restart_total")
        root = buffer.roots.get(d.trace_id.hex())
        where = place_at(d.trace_id, bytes.fromhex(root) if root else (d.parent or d.span_id), d.start, d.end)
        return self._emit(buffer, buffer.cut(self.restart.reason()), where)

    def _late_input(self, d: Decoded, now: float) -> None:
        """A span of a run judged already: kept to judge the run again with it (late.py)."""
        assert d.run_id is not None
        done = self._completed_traces.get((d.run_id, d.trace_id))
        verdict = self._late.get(done[1]) if done else None
        if verdict is None:  # forgotten (the bound), or judged before a restart: it can be marked only
            verdict = self._late.get((d.run_id, d.trace_id))
        if verdict is None:
            root = self._roots.get(d.trace_id)
            verdict = Verdict(key=(d.run_id, d.trace_id), run_id=d.run_id, completed_at=now, fp=self._fp,
                              first_trace=d.trace_id.hex(), first_root=root[0] if root else None)
            self._late.add(verdict)
        ops: list[Op] = []
        if d.call is not None:
            ops.append(journal_call(d.call, verdict.fp))
        elif d.model is not None:
            ops.append(("model", d.model))
        if d.facts:
            ops.append(("facts", dict(d.facts)))
        if d.guards:
            ops.append(("guards", list(d.guards)))
        if ops:
            self._late.note(verdict, ops, int(d.call is not None), now + self._config.root_grace_seconds)

    def duplicate(self, d: Decoded) -> list[Span]:
        """A re-delivered tool span: one info finding, never a repeated call."""
        return self._about_dropped(d, RunBuffer.telemetry_duplicate)

    def conflict(self, d: Decoded) -> list[Span]:
        """A different tool span under an id already seen: the first one stays."""
        return self._about_dropped(d, RunBuffer.span_conflict)

    def _about_dropped(self, d: Decoded, report: Callable[[RunBuffer, str, int, Optional[str]], Finding]) -> list[Span]:
        buffer = self.runs.get(d.run_id or "")
        if buffer is None or d.call is None:
            return []
        f = report(buffer, d.span_id.hex(), max(d.call.seq, 0), d.call.tool)
        # Under the run's root when known (CONTRACT section 2), as every other finding.
        root = buffer.roots.get(d.trace_id.hex())
        return self._emit(buffer, [f], place_at(d.trace_id, bytes.fromhex(root) if root else d.parent, d.start, d.end))

    # -- timers ------------------------------------------------------------------
    def tick(self) -> list[Span]:
        return [span for part in self.ticking() for span in part]

    def ticking(self) -> Iterator[list[Span]]:
        """tick() a run at a time: each open run's spans (its gaps given up, its turn judged, its
        completion), then the late calls'. The serve timer lets requests in between (a burst of
        runs completing at once would hold them all up); a run completed meanwhile is passed."""
        now = self._clock()
        for run_id in list(self.runs):
            buffer = self.runs.get(run_id)
            if buffer is not None:
                yield self._advance(run_id, buffer, now)
        yield self._judge_late(now)
        self._forget_stale(now)

    def _advance(self, run_id: str, buffer: RunBuffer, now: float) -> list[Span]:
        out: list[Span] = []
        try:  # each run on its own: one failing run must not stall the others
            before = buffer.buffered
            found = buffer.expire_gap(now, self._config.gap_wait_seconds)
            if buffer.turn_ended_at is not None and now - buffer.turn_ended_at >= self._config.root_grace_seconds:
                buffer.turn_ended_at = None
                found += buffer.judge_turn()
            self.buffered_calls += buffer.buffered - before
            out += self._emit(buffer, found)
            if self._is_complete(buffer, now):
                out += self._complete(run_id)
        except Exception:
            self._metrics.inc("internal_errors_total")
            _log.exception("could not advance run %s", run_id)
        return out

    def _forget_stale(self, now: float) -> None:
        """Entries of the side tables older than `late_cache_seconds` go: a late span that old
        opens a new run anyway, so a completed trace, a trace's root or a parent's times are of
        no use any more. Without this, the side tables filled by a burst would stay full (and
        the memory around their entries resident) until new traffic pushed them out."""
        horizon = self._config.late_cache_seconds
        self._completed_traces.drop_stale(lambda done: now - done[0] >= horizon)
        self._roots.drop_stale(lambda root: now - root[1] >= horizon)
        self._spans_seen.drop_stale(lambda times: now - times[2] >= horizon)
        self._late.drop_stale(now)

    def repack(self, copy: Callable[[str], str]) -> None:
        """Where each completed run's numbering stopped stays after a burst (a conversation may
        resume at any time), one entry per run made all through the burst, each holding the
        memory around it. With its keys copied at once (receiver/ops/trim.py) they lie together."""
        self._completed.rekey(copy)

    # -- snapshots (state_dir, snapshot.py) -------------------------------------------------
    def adopt(self, buffer: RunBuffer, traces: list[bytes]) -> None:
        """A run restored from a snapshot takes its place as if it had never left."""
        self.runs[buffer.run_id] = buffer
        self.buffered_calls += buffer.buffered
        for trace in traces:
            buffer.traces.add(trace)
            self._trace_runs.setdefault(trace, set()).add(buffer.run_id)
        self._metrics.set_gauge("runs_open", len(self.runs))

    def late_cache(self, now: float) -> dict[str, list[list[object]]]:
        """The completed runs remembered for late spans, with ages, oldest first (snapshot.py)."""
        traces = self._completed_traces.items()
        return {"runs": [[run_id, seq] for run_id, seq in self._completed.items()],
                "traces": [[run_id, trace.hex(), max(0.0, now - done[0])] for (run_id, trace), done in traces]}

    def restore_late_cache(self, runs: list[tuple[str, int]], traces: list[tuple[str, bytes, float]],
                           now: float) -> None:
        for run_id, seq in runs:
            self._completed.put(run_id, seq)
        for run_id, trace, age in traces:
            self._completed_traces.put((run_id, trace), (now - age, 0))  # judged there: its inputs are not here

    def release_for_snapshot(self) -> list[RunBuffer]:
        """At shutdown: the open runs a snapshot can carry to the next process (their inputs
        kept, their root not ended), taken out of this one unjudged."""
        out = [b for b in self.runs.values() if b.ops is not None and b.root_ended_at is None]
        for buffer in out:
            del self.runs[buffer.run_id]
            self.buffered_calls -= buffer.buffered
        return out

    def flush(self, shutdown: bool = False) -> list[Span]:
        """Complete every open run; at `shutdown`, those not yet whole are marked cut
        (receiver/runs/restart.py, rule 1) rather than scored on half their calls."""
        out: list[Span] = []
        for run_id in list(self.runs):
            buffer = self.runs[run_id]
            if shutdown and buffer.root_ended_at is None and buffer.tool_calls_seen:
                self._metrics.inc("runs_cut_at_shutdown_total")
                out += self._emit(buffer, buffer.cut(CUT_AT_SHUTDOWN))
            out += self._complete(run_id)
        return out + self._judge_late(float("inf"))  # late calls still waiting: judged now

    def shed(self, enough: Callable[[], bool], why: str) -> list[Span]:
        """Judge the least recently active open runs now, as `incomplete_trace` saying `why`,
        until `enough()`: one sender's traces that never complete cannot hold memory, and with
        it intake, from every sender. Their later spans are forwarded, not judged (late)."""
        out: list[Span] = []
        for run_id in sorted(self.runs, key=lambda r: self.runs[r].last_activity):
            if enough():
                break
            buffer = self.runs[run_id]
            buffer.shed = True  # its memory is what is needed: not kept to be judged again
            try:
                out += self._emit(buffer, [buffer.cut_short(why)])
            except Exception:  # the run is still completed (marked): its memory is what is needed
                self._metrics.inc("internal_errors_total")
                _log.exception("could not report run %s as cut short", run_id)
                buffer.incomplete = True
            out += self._complete(run_id)
            self.runs_shed += 1
            self._metrics.inc("runs_shed_total")
        return out

    @property
    def side_entries(self) -> int:
        """Entries of the bounded tables kept beside the runs (roots, completed runs, parents)."""
        return (len(self._roots) + len(self._completed_traces) + len(self._completed) + len(self._children)
                + len(self._spans_seen) + len(self._trace_runs) + self._late.side_entries)

    # -- runs --------------------------------------------------------------------
    def _run(self, run_id: str, trace_id: bytes, now: float) -> Optional[RunBuffer]:
        done = self._completed_traces.get((run_id, trace_id))
        if done is not None and now - done[0] < self._config.late_cache_seconds:
            return None  # late: a span of a trace a completed run covered
        buffer = self.runs.get(run_id)
        if buffer is None:
            # A run id seen before in other traces: a conversation resuming after its run went
            # idle. Judged as a new run that goes on with the conversation's sequence.
            first_seq = self._completed.get(run_id) or 1
            buffer = self.runs[run_id] = RunBuffer(run_id=run_id, fp=self._fp, now=now, first_seq=first_seq,
                                                   dense_seq=self._config.dense_seq, journal=True)
            self._metrics.set_gauge("runs_open", len(self.runs))
        if trace_id not in buffer.traces:
            buffer.traces.add(trace_id)
            self._trace_runs.setdefault(trace_id, set()).add(run_id)
            root = self._roots.get(trace_id)
            if root is not None:
                self._root_seen(buffer, trace_id, root[0], root[1])
        return buffer

    def _touch(self, d: Decoded, now: float, calls_here: bool) -> None:
        runs = self._trace_runs.get(d.trace_id, ())
        for run_id in runs:
            buffer = self.runs.get(run_id)
            if buffer is not None:
                buffer.last_activity = now
                if not d.parent:
                    self._root_seen(buffer, d.trace_id, d.span_id.hex(), now)
        if not d.parent:
            self._roots.put(d.trace_id, (d.span_id.hex(), now))
        # A span that may be a tool call's parent: a call arriving after it is checked against
        # it. Calls themselves are left out (a call directly under a call is rare, and they are
        # the spans held in numbers).
        if (runs or calls_here) and d.call is None:
            self._spans_seen.put(d.key, (d.start, d.end, now))
        self._check_parent(d)

    @staticmethod
    def _root_seen(buffer: RunBuffer, trace_id: bytes, root_id: str, now: float) -> None:
        """A root span ended. It ends the run only when the run is that one trace; a run
        keyed by a conversation id may go on in other traces, so it waits for idleness, but
        what that turn held is judged after the same grace (RunBuffer.judge_turn)."""
        if len(buffer.roots) < MAX_ROOTS_PER_RUN:
            buffer.roots[trace_id.hex()] = root_id
        if buffer.run_id == trace_id.hex():
            buffer.root_ended_at = now
        else:
            buffer.turn_ended_at = now

    def _is_complete(self, buffer: RunBuffer, now: float) -> bool:
        if buffer.root_ended_at is not None and now - buffer.root_ended_at >= self._config.root_grace_seconds:
            return True
        return now - buffer.last_activity >= self._config.idle_timeout_seconds

    def _complete(self, run_id: str) -> list[Span]:
        buffer = self.runs.pop(run_id)
        if self.on_complete is not None:
            self.on_complete(run_id)
        self._stop_waiting(buffer)
        self.buffered_calls -= buffer.buffered
        self.open_calls -= buffer.tool_calls_seen
        broken = False
        missing = 0
        try:
            found = buffer.complete()
            missing, short = self._calls_missing(buffer)
            out = self._emit(buffer, found + short)
        except Exception:  # never lose the other runs (or this one's summary) to one bug
            self._metrics.inc("internal_errors_total")
            _log.exception("could not complete run %s", run_id)
            buffer.integrity_error, out, broken = True, [], True
        for trace in buffer.traces:
            trace_runs = self._trace_runs.get(trace)
            if trace_runs is not None:
                trace_runs.discard(run_id)
                if not trace_runs:
                    del self._trace_runs[trace]
        now = self._clock()
        self._verdicts_made += 1
        for trace in buffer.traces:
            self._completed_traces.put((run_id, trace), (now, self._verdicts_made))
        self._completed.put(run_id, buffer.next_seq)
        self._metrics.set_gauge("runs_open", len(self.runs))
        self._metrics.inc("runs_completed_total")
        if buffer.skew_events:
            self._metrics.inc("clock_skew_total", buffer.skew_events)
        summary = self._summary(buffer, missing=missing) if buffer.tool_calls_seen else None
        if summary is not None:
            out.append(summary)
        self._late.add(self._verdict(buffer, summary, now, revisable=not (broken or buffer.shed)))
        return out

    def _verdict(self, buffer: RunBuffer, summary: Optional[Span], now: float, revisable: bool) -> Verdict:
        """What a completed run keeps for its late calls: its inputs when it can be judged again."""
        inputs = None
        if revisable and buffer.ops is not None and buffer.emitted is not None:
            inputs = Inputs(buffer.ops, buffer.emitted, tuple(buffer.noted), tuple(buffer.agents), buffer.roots)
        first_trace = buffer.first_trace
        return Verdict(key=self._verdicts_made, run_id=buffer.run_id, completed_at=now, fp=buffer.fingerprinter,
                       first_seq=buffer.first_seq, dense_seq=self._config.dense_seq, journal=inputs,
                       first_trace=first_trace, first_root=buffer.roots.get(first_trace) if first_trace else None,
                       clock_skew=buffer.clock_skew, summary_id=summary.span_id if summary is not None else None)

    # -- late calls (late.py) ----------------------------------------------------------
    def _judge_late(self, now: float) -> list[Span]:
        out: list[Span] = []
        for verdict in self._late.due(now):
            try:  # each run on its own, as at completion
                out += self._revise(verdict)
            except Exception:
                self._metrics.inc("internal_errors_total")
                _log.exception("could not judge the late calls of run %s", verdict.run_id)
        return out

    def _revise(self, verdict: Verdict) -> list[Span]:
        """A completed run's late inputs, their wait over: judged with the run again, or past the
        bound, the run's verdict marked partial. Late model spans count too (they say where a
        decision ends, which groups calls into turns); other late inputs alone change no verdict:
        kept for the next time."""
        ops, calls = self._late.taken(verdict)
        if not calls and not any(op[0] == "model" for op in ops):
            if verdict.journal is not None and ops:
                journal, emitted, noted, agents, roots = verdict.journal.unpacked()
                self._late.rejournal(verdict, Inputs(journal + ops, emitted, noted, agents, roots))
            return []
        verdict.late_calls += calls
        if verdict.journal is not None and verdict.summaries <= MAX_REVISIONS:
            return self._rejudged(verdict, ops)
        return self._marked_partial(verdict)

    def _rejudged(self, verdict: Verdict, ops: list[Op]) -> list[Span]:
        """The run judged again from all its inputs: the findings not sent before, then a summary."""
        assert verdict.journal is not None
        journal, emitted, noted, agents, roots = verdict.journal.unpacked()
        now = self._clock()
        buffer = RunBuffer(run_id=verdict.run_id, fp=verdict.fp, now=now, first_seq=verdict.first_seq,
                           dense_seq=verdict.dense_seq, journal=True)  # journalled again: its model calls' waste
        buffer.roots.update(roots)
        buffer.agents = list(agents)
        buffer.clock_skew = verdict.clock_skew
        buffer.emitted = None  # the verdict's keys say what was sent
        journal = [op for op in journal if op[0] != "gap"] + ops
        new: list[Finding] = []
        found = buffer.rejudge(journal, noted, now)
        missing, short = self._calls_missing(buffer)
        for f in found + short:
            key = finding_key(f)
            if key not in emitted:
                emitted.add(key)
                new.append(f)
        self._late.rejournal(verdict, Inputs(journal, emitted, noted, agents, roots))
        return self._emit(buffer, new) + [self._resummarised(verdict, buffer, missing)]

    def _resummarised(self, verdict: Verdict, buffer: RunBuffer, missing: int = 0) -> Span:
        span = self._summary(buffer, {**self._revision(verdict), "loopguard.run.late_calls": verdict.late_calls},
                             missing=missing)
        verdict.summary_id = verdict.summary_id or span.span_id
        verdict.summaries += 1
        return span

    def _revision(self, verdict: Verdict) -> dict[str, object]:
        """A summary after the first says which one it revises (none was sent for a run whose
        calls all came late: this one is its first)."""
        if verdict.summary_id is None:
            return {}
        self._metrics.inc("run_revisions_total")
        return {"loopguard.run.revision": verdict.summaries + 1, "loopguard.run.revises": verdict.summary_id.hex()}

    def _marked_partial(self, verdict: Verdict) -> list[Span]:
        """Past the bound: the run is not judged again; a finding and a summary say its verdict
        covers only the calls before the late ones. Once: later late calls are counted only."""
        self._late.release(verdict)
        verdict.partial = True
        self._metrics.inc("runs_marked_partial_total")
        buffer = RunBuffer(run_id=verdict.run_id, fp=verdict.fp, now=self._clock())
        if verdict.first_trace and verdict.first_root:
            buffer.roots[verdict.first_trace] = verdict.first_root
        buffer.first_trace = verdict.first_trace
        where = self._fallback(buffer)
        reason = (f"{verdict.late_calls} tool calls arrived after the run was judged, past what this receiver keeps to "
                  f"judge a run again (late_cache_seconds, the memory bound, {MAX_REVISIONS} revisions, or a restart "
                  "in between): the run's verdict covers only the calls before them")
        finding = Finding(kind="incomplete_trace", severity=WARN, first_seq=0, last_seq=0, count=verdict.late_calls,
                          seqs=(), span_ids=(), reason=reason).stamped(verdict.run_id, verdict.fp.policy.version)
        extra = {"loopguard.run.outcome": "incomplete_trace", "loopguard.run.late_calls": verdict.late_calls,
                 **self._revision(verdict)}
        _log.info("run %s marked partial: %d tool calls came after it was judged", verdict.run_id, verdict.late_calls)
        summary = run_span(verdict.run_id, where, {"scorable": False, "partial": True}, extra)
        verdict.summary_id = verdict.summary_id or summary.span_id
        verdict.summaries += 1
        return self._emit(buffer, [finding], where) + [summary]

    # -- clock skew ----------------------------------------------------------------
    # Checked whichever of the two arrives last: the same report in every delivery order.
    def _watch_parent(self, d: Decoded, buffer: RunBuffer) -> None:
        if not d.parent:
            return
        parent_key = d.trace_id + d.parent
        parent = self._spans_seen.get(parent_key)
        if parent is not None:
            if _outside(d.start, d.end, parent[0], parent[1]):
                self._skewed(buffer.run_id)
            return
        waiting = self._children.get(parent_key)  # siblings wait together (spans end children first)
        if waiting is None:
            self._children.put(parent_key, [(buffer.run_id, d.start, d.end)])
        elif len(waiting) < MAX_CHILDREN_WAITING:
            waiting.append((buffer.run_id, d.start, d.end))
        else:
            return
        buffer.waiting_parents.add(parent_key)

    def _note_counted(self, buffer: RunBuffer, d: Decoded) -> None:
        """A root span saying how many tool calls the processor numbered in its trace's run
        (root.py): only for the run that is that one trace (the count is that run's)."""
        counted = d.facts.get(conv.RUN_CALLS) if d.facts else None
        if (not d.parent and isinstance(counted, int) and not isinstance(counted, bool) and counted > 0
                and buffer.run_id == d.trace_id.hex()):
            self._counted.put(buffer.run_id, counted)

    def _calls_missing(self, buffer: RunBuffer) -> tuple[int, list[Finding]]:
        """A completed run whose root counted more calls than arrived: the last ones were lost
        on the way (a sender's full queue, a crash), and no hole in the numbers says so (a hole
        inside is reported as one already). How many, and an `incomplete_trace` saying so."""
        counted = self._counted.get(buffer.run_id)
        last = buffer.last_call
        if counted is None or last is None or last.seq < 1 or buffer.first_seq != 1:
            return 0, []  # no count, or calls without the processor's numbering
        missing = counted - last.seq
        if missing <= 0:
            return 0, []
        reason = (f"the run's root span says the app numbered {counted} tool calls, and the last {missing} never "
                  "arrived: they were lost before they reached the receiver (a sender's full queue, a crash), "
                  "so the run is not scored")
        return missing, [buffer.cut_short(reason)]

    def _stop_waiting(self, buffer: RunBuffer) -> None:
        """A completed run's calls stop waiting for their parents: a parent arriving later could
        no longer mark the run. Otherwise the calls of runs whose parent never comes (shed runs
        of traces that never complete) stay after their runs, outside the memory estimate
        (docs/reliability.md, "Overload")."""
        for parent_key in buffer.waiting_parents:
            waiting = self._children.get(parent_key)
            if waiting is not None:
                waiting[:] = [w for w in waiting if w[0] != buffer.run_id]
                if not waiting:
                    self._children.pop(parent_key)
        buffer.waiting_parents.clear()

    def _check_parent(self, d: Decoded) -> None:
        for run_id, start, end in self._children.pop(d.key) or ():
            if _outside(start, end, d.start, d.end):
                self._skewed(run_id)

    def _skewed(self, run_id: str) -> None:
        self._metrics.inc("clock_skew_total")
        buffer = self.runs.get(run_id)
        if buffer is not None:
            buffer.clock_skew = True
        _log.debug("clock skew in run %s: a tool call lies outside its parent span", run_id)

    # -- output --------------------------------------------------------------------
    def _summary(self, buffer: RunBuffer, late: Optional[dict[str, object]] = None, missing: int = 0) -> Span:
        """`late`: a run judged again with late calls (the revision and late-call attributes);
        `missing`: calls its root span counted that never arrived (_calls_missing)."""
        outcome, score = buffer.score()
        calls = [c for c in (buffer.first_call, buffer.last_call) if c is not None]
        where = place(calls, buffer.roots, time.time_ns()) or self._fallback(buffer)
        extra = {"loopguard.run.outcome": outcome, "loopguard.run.clock_skew": buffer.clock_skew, **(late or {})}
        if missing:
            extra["loopguard.run.calls_missing"] = missing
        seqs = {s for f in buffer.findings if f.kind in WASTE_KINDS for s in f.seqs}
        waste = run_waste(buffer.findings, {s: c for s in seqs if (c := buffer.recent.get(s))},
                          _models(buffer, bool(seqs)), _totals(buffer))
        extra.update(waste.attributes("loopguard.run.waste"))
        if late is None:
            _log.info("run %s complete: %s, %d tool calls", buffer.run_id, outcome, buffer.tool_calls_seen)
        else:
            _log.info("run %s judged again with %s late tool calls: %s, %d tool calls", buffer.run_id,
                      late["loopguard.run.late_calls"], outcome, buffer.tool_calls_seen)
        return run_span(buffer.run_id, where, score, extra)

    def _emit(self, buffer: RunBuffer, found: list[Finding], where: Optional[Placement] = None) -> list[Span]:
        spans: list[Span] = []
        for f in found:
            self._sent(buffer, f)
            calls = [c for c in (buffer.recent.get(s) for s in f.seqs) if c]
            label = self._tool_label(f.tool)  # bounded: the metric's label and the span name's tool
            self._metrics.inc("findings_total", kind=f.kind, tool=label, severity=f.severity)
            _log.warning(
                "finding %s/%s tool=%s run=%s seq=%d-%d: %s",
                f.kind, f.severity, f.tool or "-", f.run_id, f.first_seq, f.last_seq, f.reason,
            )
            waste = finding_waste(f, {c.seq: c for c in calls}, _models(buffer), _totals(buffer)) \
                if f.kind in WASTE_KINDS else None
            spans.append(finding_span(
                f, calls, where or place(calls, buffer.roots, time.time_ns()) or self._fallback(buffer),
                tool_label=label or None, arguments=buffer.arguments.get(f.action) if f.action else None,
                extra=waste.attributes("loopguard.finding.waste") if waste else None))
        return spans

    @staticmethod
    def _sent(buffer: RunBuffer, f: Finding) -> None:
        """Noted so that judging the run again with late calls does not send it twice; past the
        bound on kept findings the run can only be marked partial (late.py)."""
        if buffer.emitted is not None:
            buffer.emitted.add(finding_key(f))
            if len(buffer.emitted) > 2 * MAX_KEPT_FINDINGS:
                buffer.emitted = None

    def _tool_label(self, tool: Optional[str]) -> str:
        """Bounded metric labels: the policy's tools and the first few others, then "other"."""
        if not tool:
            return ""
        if tool in self._fp.policy.tools or tool in self._tool_labels:
            return tool
        if len(self._tool_labels) < MAX_TOOL_LABELS:
            self._tool_labels.add(tool)
            return tool
        return "other"

    @staticmethod
    def _fallback(buffer: RunBuffer) -> Placement:
        now = time.time_ns()
        trace = buffer.first_trace or "0" * 32
        return place_at(bytes.fromhex(trace), bytes.fromhex(buffer.roots.get(trace, "")), now, now)


def _models(buffer: RunBuffer, needed: bool = True) -> ModelIndex:
    """The run's model decisions, from its journal (None there: too long to keep, tokens unknown)."""
    return buffer.models() if needed else ModelIndex((), buffer.fingerprinter.policy.price_for)


def _totals(buffer: RunBuffer) -> RunTotals:
    return run_totals([c for c in (buffer.first_call, buffer.last_call) if c is not None], buffer.tool_calls_seen)


def _outside(start: int, end: int, parent_start: int, parent_end: int) -> bool:
    """A call that starts before its parent, or ends after it (a parent still open has no end)."""
    return start < parent_start or bool(parent_end and end > parent_end)
