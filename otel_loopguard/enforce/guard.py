"""Enforce mode: a guard consulted before a tool call is dispatched.

`check()` answers allow / warn / deny from the calls already observed in the
run (the same detectors as everywhere, asked to preview the proposed call);
`record()` feeds the executed call and its result back. A denied call never
runs: the adapter returns `decision.message` to the model as the tool's result.
A recorded call is fingerprinted (its equivalence: shape, items, argument sketch) on the
guard's worker (worker.py), never on the application's thread unless the worker is behind:
each check first finishes its run's queued calls, in order, so no decision sees a stale run.
Which tools are enforced: a tool's `enforce` policy key decides; without it,
read-only tools are enforced and side-effecting tools only when they declare an
idempotency key (docs/guard.md).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..bounded import BoundedMap
from ..calls import ModelCall, RawCall, ToolCall
from ..detect import Run
from ..detect.base import Step
from ..detect.budgets import BudgetDetector
from ..detect.run import STOPPED_EARLIER
from ..findings import TOOL_LEVEL_KINDS, WARN as WARN_LEVEL, Finding
from ..mode import GuardMode, note_enforced_run
from ..fingerprint import Fingerprinter, fingerprint_call
from ..policy import Policy
from ..policy_source import PolicySource
from ..progress import Judgement
from .worker import QUEUE_CAP, GuardWorker

ALLOW, WARN, DENY = "allow", "warn", "deny"
MAX_RUNS = 10_000
# Findings of settled calls kept for `findings()` until asked (most calls find nothing).
MAX_HELD_FINDINGS = 256
_UNJUDGED = Judgement(progressed=False, novel_result=False, new_items=0, terminal=False)

NUDGE = (
    "[loop guard] {reason}. Change your approach: use different arguments, another tool, "
    "or answer with what you already have."
)
DENIED = (
    "Not executed: loop guard ({reason}). The call was not run. Do not repeat it; use what you "
    "already know, try a different approach, or explain what is blocking you."
)
# Once a run is stopped every later call is denied: say so, rather than invite other attempts.
STOPPED = (
    "Not executed: loop guard ({reason}). This run was stopped and no further tool calls will "
    "run. Do not call tools again; answer with what you already have and say what is missing."
)

# Seed 001's graceful wrap-up: the one tool-free model turn after a stop, whose answer is the
# run's partial result. Every adapter sends this text (docs/guard.md, "Wrap-up").
WRAP_UP = (
    "Stop here. Do not call any more tools. Summarize what you did, what you found, and what is "
    "blocking you, so the work can continue later."
)


@dataclass(frozen=True)
class Stop:
    """Why the guard stopped a run: the finding kind and its reason."""

    kind: str
    reason: str


@dataclass(frozen=True)
class Decision:
    action: str  # allow, warn or deny
    kind: Optional[str]
    reason: str
    message: str  # denied: the tool result to return; warn: the nudge to append
    enforced: bool  # False: the tool is observed only, a deny is reported as would_block
    ticket: Optional[ToolCall]  # what record() needs; None when denied
    arguments: Any = field(default=None, repr=False)  # for record(): idempotency keys, cursors

    @property
    def denied(self) -> bool:
        return self.action == DENY and self.enforced


# Streaks and patterns across tools: in a mixed rollout only enforced tools' calls, in a row,
# make an enforced stop of these (docs/rollout.md, "Per-tool semantics"). Every other kind is
# one tool's own pattern (repeat, cap, polls, duplicate writes) or the run's totals (budgets).
RUN_STREAKS = frozenset({"cycle", "error_streak", "no_progress"})


class _Queued:
    """A recorded call waiting to be observed: whoever holds `claim` fills in `call`."""

    __slots__ = ("raw", "enforced", "call", "claim")

    def __init__(self, raw: RawCall, enforced: bool):
        self.raw = raw
        self.enforced = enforced
        self.call: Optional[ToolCall] = None
        # Held while the call is fingerprinted, by the worker or by a check that could not
        # wait for it: the call is fingerprinted once, never by both.
        self.claim = threading.Lock()


class _RunState:
    __slots__ = ("run", "own", "fp", "seq", "stop", "queued", "found", "budget")

    def __init__(self, fp: Fingerprinter, run_id: str):
        self.fp = fp  # the policy a run opened under judges it to its end (policy_source.py)
        self.run = Run(run_id, fp.policy)  # every call: what enforcing every tool would do
        # Enforced tools' calls only, each observe-only call a gap (streaks start afresh): the
        # run-level streaks enforce mode acts on. The same Run when every tool is enforced.
        self.own = Run(run_id, fp.policy) if _mixed(fp.policy) else self.run
        self.seq = 0
        # (kind, reason) of the first run-level stop enforce mode acts on: an enforced tool's
        # call caused it, or a budget was used up (whoever used it). The run's own `stopped`
        # may come from an observe-only tool: that one only says would_block.
        self.stop: Optional[tuple[str, str]] = None
        self.queued: collections.deque[_Queued] = collections.deque()  # recorded, not observed yet
        self.found: collections.deque[Finding] = collections.deque(maxlen=MAX_HELD_FINDINGS)
        # The run's budgets judged at record() from times, turns and tokens alone (no
        # equivalence needed), fed exactly what the run's own budget is fed, in the same order:
        # record() returns its findings at once (the wall-time budget's late warning).
        self.budget = BudgetDetector(fp.policy)


class Guard:
    def __init__(self, policy: Fingerprinter | PolicySource, enforce: bool = True, *, mode: Optional[GuardMode] = None,
                 clock: Callable[[], int] = time.monotonic_ns, background: bool = True, queue_cap: int = QUEUE_CAP):
        """`background=False`: recorded calls are fingerprinted on the caller's thread, in
        record() (the same decisions and findings; for comparison). `queue_cap`: calls the
        worker may have waiting; beyond it record() does the work itself."""
        self._source = PolicySource.of(policy) if isinstance(policy, Fingerprinter) else policy
        # Times a call's start (at check) and end (at record) for the wall-time budget; only
        # differences count, so a monotonic clock. Tests inject their own.
        self._clock = clock
        # The process's one mode (mode.py), asked at each check; without one, `enforce` decides.
        self._mode = mode if mode is not None else GuardMode("enforce" if enforce else "observe")
        self._runs: BoundedMap[str, _RunState] = BoundedMap(MAX_RUNS)
        self._lock = threading.Lock()
        # Weakly: a forgotten guard must not live on in its worker (nor its policy file's watch).
        me = weakref.ref(self)
        self._worker = GuardWorker(lambda job: _run_job(me, job), queue_cap) if background else None
        if hasattr(os, "register_at_fork"):
            # The worker may have held the lock at the fork: the child's is a new one.
            relock = weakref.WeakMethod(self._at_fork_reinit)
            os.register_at_fork(after_in_child=lambda: (m := relock()) is not None and m())

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()

    def shutdown(self) -> None:
        """Stop the worker: from now on record() fingerprints on the caller's thread. Calls
        still queued are finished by their run's next check (nothing is lost)."""
        if self._worker is not None:
            self._worker.stop()

    @property
    def policy(self) -> Policy:
        """The policy this guard judges new runs by (its version is stamped on every finding)."""
        return self._source.fingerprinter.policy

    @property
    def mode(self) -> str:
        """`enforce` or `observe`, as the next check will apply it (docs/guard.md, "Mode")."""
        return self._mode.current()

    def stopped(self, run_id: str) -> Optional[Stop]:
        """The run-level stop this guard enforces in `run_id` (an enforced tool's call caused
        it), or None: the run goes on, was stopped only by an observe-only tool, or the guard
        only observes. Once set it stays: the run's later enforced calls are denied."""
        if self.mode != "enforce":
            return None
        with self._lock:
            state = self._runs.get(run_id)
            if state is not None:
                _settle(state)
            stop = state.stop if state is not None else None
        return Stop(*stop) if stop is not None else None

    def findings(self, run_id: str) -> list[Finding]:
        """The findings the run's recorded calls completed since the last ask (record()
        returns only the budgets' at once: the rest need the call's equivalence, computed on
        the worker). The run's queued calls are finished first."""
        with self._lock:
            state = self._runs.get(run_id)
            if state is None:
                return []
            _settle(state)
            found = list(state.found)
            state.found.clear()
        return found

    def check(self, tool: str, arguments: Any, *, run_id: str, turn: Optional[int] = None) -> Decision:
        enforcing = self._mode.current() == "enforce"
        if enforcing:
            note_enforced_run(run_id)  # its spans say loopguard.mode=enforce
        with self._lock:
            state = self._state(run_id)
            _settle(state)  # calls the worker has not reached yet: done here, in order
            proposed = fingerprint_call(
                RawCall(seq=state.seq + 1, tool=tool, arguments=arguments, turn=turn, finished=False,
                        start_ns=self._clock()), state.fp
            )
            verdicts = state.run.preview(proposed)
            tool_enforced = _enforced(state, tool)
            # The enforced streaks' own judgement of this call (an observe-only tool has none).
            own = state.own.preview(proposed) if tool_enforced and state.own is not state.run else None
            stop, stopped_earlier, acts = _pick_stop(verdicts, own, state.stop)
            # A stop enforce mode does not act on (an observe-only tool caused it, or its streak
            # ran through observe-only calls) is a would_block at most.
            enforced = enforcing and tool_enforced and acts
            if stop is not None and tool_enforced and acts:
                # An observe-only guard stops the run too: its decisions say what enforce mode
                # would do, and enforce mode would deny every later call.
                state.run.denied(proposed, stop[1], stop[2])
                if state.own is not state.run:
                    state.own.denied(proposed, stop[1], stop[2])
                if state.stop is None and stop[1] not in TOOL_LEVEL_KINDS:
                    state.stop = (stop[1], stop[2])
            warn = _pick_warn(verdicts, own) if stop is None else None
        if stop is not None:
            text = (STOPPED if stopped_earlier else DENIED).format(reason=stop[2])
            return Decision(action=DENY, kind=stop[1], reason=stop[2], message=text, enforced=enforced, ticket=None if enforced else proposed, arguments=arguments)
        if warn is not None:
            nudged = enforcing and tool_enforced and warn[1]
            return Decision(action=WARN, kind=warn[0][1], reason=warn[0][2], message=NUDGE.format(reason=warn[0][2]),
                            enforced=nudged, ticket=proposed, arguments=arguments)
        return Decision(action=ALLOW, kind=None, reason="", message="", enforced=enforced, ticket=proposed, arguments=arguments)

    def record(self, decision: Decision, result: Any, ok: bool, *, run_id: str,
               start_ns: Optional[int] = None, end_ns: Optional[int] = None) -> list[Finding]:
        """The executed call with its result: this is what later checks judge. Its times, on
        the guard's clock, default to the check (start) and now (end): the wall-time budget
        is judged on them, as the processor judges it on the spans' times. Returns the
        budgets' findings the call completes (all the late warning needs); the call's other
        findings, which need its equivalence, come from `findings()`."""
        if decision.ticket is None:
            return []
        planned = decision.ticket
        end = self._clock() if end_ns is None else end_ns
        with self._lock:
            state = self._state(run_id)
            state.seq += 1
            # The arguments again (the digest is reused), so side-effecting calls keep their
            # idempotency key and progress rules their cursor.
            raw = RawCall(seq=state.seq, tool=planned.tool, arguments=decision.arguments, result=result, ok=ok,
                          turn=planned.turn, args_digest=planned.action,
                          start_ns=planned.start_ns if start_ns is None else start_ns, end_ns=end)
            job = _Queued(raw, _enforced(state, planned.tool))
            state.queued.append(job)
            early = _budget_findings(state, raw)
            if self._worker is None:
                _settle(state)
        if self._worker is not None and not self._worker.offer((state, job)):
            with self._lock:
                _settle(state)  # the worker is behind by a full queue: never drop, do it here
        return early

    def _fingerprint_queued(self, item: tuple[_RunState, _Queued]) -> None:
        """The worker's job: the call's digests and equivalence outside the lock (pure), then
        the run's calls observed in order, as far as they are fingerprinted."""
        state, job = item
        if job.claim.acquire(blocking=False):  # else a check is doing it
            try:
                if job.call is None:
                    job.call = fingerprint_call(job.raw, state.fp)
            finally:
                job.claim.release()
        with self._lock:
            _settle(state, compute=False)

    def late_warning(self, decision: Decision, found: list[Finding]) -> Optional[Decision]:
        """A warn the call's own outcome revealed, for a call the check allowed: the wall-time
        budget's warn level crossed while the call ran (no preview can know how long a call
        will take). The adapter records it and nudges the result, as for a warn decided
        before the call: the call the processor marks `would_warn`. None otherwise."""
        if decision.action != ALLOW:
            return None
        late = next((f for f in found if f.kind == "budget" and f.severity == WARN_LEVEL), None)
        if late is None:
            return None
        return dataclasses.replace(decision, action=WARN, kind=late.kind, reason=late.reason,
                                   message=NUDGE.format(reason=late.reason))

    def record_model(self, *, run_id: str, turn: int, input_tokens: int = 0, output_tokens: int = 0,
                     model: Optional[str] = None) -> list[Finding]:
        """A model decision (turn `turn`, its token counts): the turn and cost budgets judge
        it, so a run whose spend is used up is denied its next call."""
        model_call = ModelCall(turn=turn, input_tokens=input_tokens, output_tokens=output_tokens, model=model)
        with self._lock:
            state = self._state(run_id)
            _settle(state)  # the budget names the last call: the recorded ones come first
            state.budget.observe_model(model_call, None)
            return state.run.observe_model(model_call)

    def _state(self, run_id: str) -> _RunState:
        return self._runs.get_or_create(run_id, lambda: _RunState(self._source.for_new_run(), run_id))


def _run_job(guard: "weakref.ref[Guard]", job: tuple[_RunState, _Queued]) -> None:
    alive = guard()
    if alive is not None:
        alive._fingerprint_queued(job)


def _settle(state: _RunState, compute: bool = True) -> None:
    """Observe the run's recorded calls in order: fingerprinting those the worker has not
    reached (`compute`), else stopping at the first one. Under the guard's lock."""
    queued = state.queued
    while queued:
        if queued[0].call is None and not compute:
            return
        job = queued.popleft()  # first: a call whose fingerprinting fails is not tried forever
        if job.call is None:
            with job.claim:  # the worker may be at it: wait for it rather than do it twice
                if job.call is None:
                    job.call = fingerprint_call(job.raw, state.fp)
        _observe(state, job.call, job.enforced)


def _observe(state: _RunState, call: ToolCall, tool_enforced: bool) -> None:
    before, own_before = state.run.stopped, state.own.stopped
    state.found.extend(state.run.observe(call))
    if state.own is not state.run:
        if tool_enforced:
            state.own.observe(call)
        else:
            state.own.gap()  # an observe-only call: enforced streaks start afresh
    if state.stop is None:
        state.stop = _new_stop(state, before, own_before, tool_enforced)


def _budget_findings(state: _RunState, raw: RawCall) -> list[Finding]:
    """The budgets' findings of a recorded call, before its equivalence is known: they read
    only its number, turn and times (the same findings the run's own budget gives it)."""
    call = ToolCall(seq=raw.seq, tool=raw.tool, action=raw.args_digest or "", result=None, ok=raw.ok,
                    turn=raw.turn, start_ns=raw.start_ns, end_ns=raw.end_ns)
    found = state.budget.observe(Step(call=call, decision=0, judgement=_UNJUDGED, rule=state.fp.policy.rule(raw.tool)))
    policy = state.fp.policy
    return [f.stamped(state.run.run_id, policy.version) for f in found]


def _enforced(state: _RunState, tool: str) -> bool:
    rule = state.fp.policy.rule(tool)
    if rule.enforce is not None:
        return rule.enforce
    # Read-only tools first; a side-effecting tool only with an idempotency rule.
    return not rule.side_effect or rule.idempotency_key is not None


def _mixed(policy: Policy) -> bool:
    """Whether some tool of the policy is observe-only (tools it does not name are enforced)."""
    return any(rule.enforce is False or (rule.enforce is None and rule.side_effect and rule.idempotency_key is None)
               for rule in policy.tools.values())


def _new_stop(state: _RunState, before: Optional[Finding], own_before: Optional[Finding],
              tool_enforced: bool) -> Optional[tuple[str, str]]:
    """The run-level stop a recorded call brought that enforce mode acts on: a budget used up
    (whoever used it), else, in a mixed rollout, a stop of the enforced calls' own run (their
    streaks judged on them alone, even when the run of all calls was stopped earlier by an
    observe-only tool), else a stop an enforced tool's call caused."""
    after, own_after = state.run.stopped, state.own.stopped
    if after is not None and after is not before and after.kind == "budget":
        return (after.kind, after.reason)
    if state.own is not state.run:
        if own_after is not None and own_after is not own_before and own_after.kind != "budget":
            return (own_after.kind, own_after.reason)
        return None
    if tool_enforced and after is not None and after is not before:
        return (after.kind, after.reason)
    return None


def _is_stop(v: tuple[str, str, str]) -> bool:
    return v[0] == "stop" and not v[2].startswith(STOPPED_EARLIER)


def _is_earlier(v: tuple[str, str, str]) -> bool:
    return v[0] == "stop" and v[2].startswith(STOPPED_EARLIER)


def _acting(verdicts: list[tuple[str, str, str]], own: Optional[list[tuple[str, str, str]]], level: str
            ) -> list[tuple[str, str, str]]:
    """The verdicts of `level` enforce mode acts on: every kind from the run of all calls, but
    the run-level streaks from the enforced calls' own run when the rollout is mixed."""
    if own is None:
        return [v for v in verdicts if v[0] == level and not _is_earlier(v)]
    return ([v for v in verdicts if v[0] == level and not _is_earlier(v) and v[1] not in RUN_STREAKS]
            + [v for v in own if v[0] == level and not _is_earlier(v) and v[1] in RUN_STREAKS])


def _pick_stop(verdicts: list[tuple[str, str, str]], own: Optional[list[tuple[str, str, str]]],
               enforced_stop: Optional[tuple[str, str]]) -> tuple[Optional[tuple[str, str, str]], bool, bool]:
    """The stop to report, whether it is the run's earlier stop, and whether enforce mode acts
    on it. An earlier stop enforce mode acts on comes first (a stale count of the pattern that
    stopped it would mislead, since the denied calls never ran), then the call's own
    thresholds. A stop enforce mode does not act on (caused by an observe-only tool, or a
    run-level streak through observe-only calls) gives a would_block, never a denial."""
    earlier = [v for v in verdicts if _is_earlier(v)] + [v for v in own or () if _is_earlier(v)]
    if earlier and enforced_stop is not None:
        return ("stop", enforced_stop[0], f"{STOPPED_EARLIER}{enforced_stop[1]}"), True, True
    acting = _acting(verdicts, own, "stop")
    if acting:
        return acting[0], False, True
    fresh = [v for v in verdicts if _is_stop(v)]
    if fresh:
        return fresh[0], False, False
    if earlier:
        return earlier[-1], True, False
    return None, False, True


def _pick_warn(verdicts: list[tuple[str, str, str]], own: Optional[list[tuple[str, str, str]]]
               ) -> Optional[tuple[tuple[str, str, str], bool]]:
    """The warning to report, and whether enforce mode nudges with it (as for stops)."""
    acting = _acting(verdicts, own, "warn")
    if acting:
        return acting[0], True
    observed = next((v for v in verdicts if v[0] == "warn"), None)
    return (observed, False) if observed is not None else None
