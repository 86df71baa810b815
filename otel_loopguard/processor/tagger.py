"""Tag finished tool spans: digests, sequence, turn, outcome, key id, mode; judge the run.

Shared by the span processor (on its worker thread) and the exporter wrapper
(on the export thread). It sees spans in the order they end: for an agent
loop that is dispatch order (a decision's calls end before the next decision
is made); parallel siblings of one decision are numbered in the order they end.
"""

from __future__ import annotations

import bisect
import collections
import functools
import logging
import threading
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple, Optional

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import StatusCode
from opentelemetry.util.types import Attributes

from ..bounded import BoundedMap
from ..calls import NO_EQUIVALENCE, ModelCall, RawCall, ToolCall
from ..conventions import ModelSpan, ToolSpan, recognise
from ..conventions import attributes as conv
from ..conventions.handoffs import is_handoff, target_unknown
from ..conventions.sketches import to_attributes as sketch_attributes
from ..conventions.spec import MODEL_CONVENTIONS, OPENINFERENCE_HANDOFF, TOOL_CONVENTIONS
from ..detect import Run
from ..detect.run import STOPPED_EARLIER, stops_run
from ..findings import AT_NEXT_CALL_KINDS, STOP, TOOL_LEVEL_KINDS, WARN, Finding
from ..fingerprint import Fingerprinter, fingerprint_call
from ..mode import span_mode
from ..policy_source import PolicySource
from .config import ProcessorConfig
from .delegations import ManagedAgents
from .open_models import OpenModels
from .root import RootMarks
from .sdk_shape import attributes_of, copy_span

_log = logging.getLogger("otel_loopguard.processor")

MARKERS = tuple(dict.fromkeys([c.marker for c in TOOL_CONVENTIONS] + [c.marker for c in MODEL_CONVENTIONS] + [conv.TOOL_NAME]))
# Every attribute that can hold a raw tool payload, under any convention.
RAW_PAYLOAD_KEYS = frozenset(k for c in TOOL_CONVENTIONS for k in (*c.arguments, *c.result)) | {"output.value", "input.value"}
DECISION_EVENT = "loopguard.decision"
MAX_MODEL_ENDS = 4096
MAX_RESERVED = 4096  # tool spans started and not yet ended, per run
MAX_SCOPED_SPANS = 100_000
RECENT_CALLS = 8  # tool calls (and model calls) per run checked for a twin from another instrumentation  # open spans whose agent scope is remembered (agent_scopes only)
# Spans that start an agent's scope, by convention (marker attribute -> values).
AGENT_MARKERS = (
    ("gen_ai.operation.name", frozenset({"invoke_agent"})),
    ("openinference.span.kind", frozenset({"AGENT", "agent"})),
    ("traceloop.span.kind", frozenset({"agent"})),
)


MARKER_KEYS = frozenset(MARKERS)
TOOL_MARKER_KEYS = frozenset(c.marker for c in TOOL_CONVENTIONS)
_NO_ATTRIBUTES: Mapping[str, Any] = MappingProxyType({})
HANDOFF_SPAN_PREFIX = OPENINFERENCE_HANDOFF.span_name_prefix  # the one handoff numbered at start


def interesting(span: ReadableSpan) -> bool:
    """Cheap, for the application thread: could this be a tool or model span?"""
    # Set against set: C iterates the smaller side.
    return not attributes_of(span).keys().isdisjoint(MARKER_KEYS)


class _RunState:
    __slots__ = ("run", "fp", "seq", "observed", "model_ends", "models_forgotten", "reserved", "budget_findings",
                 "stopped", "stopped_mark", "turn_limit", "capped", "reserved_by", "adopted", "recent", "models", "scopes")

    def __init__(self, fp: Fingerprinter, run_id: str):
        self.fp = fp  # the policy a run opened under judges it to its end (policy_source.py)
        self.run = Run(run_id, fp.policy)
        self.seq = 0  # the exported loopguard.seq: taken at start when known, else at end
        self.observed = 0  # the order calls reach the detectors in
        self.model_ends: list[int] = []  # end times of the latest model spans, sorted
        self.models_forgotten = 0  # older model spans no longer in model_ends
        self.reserved: dict[int, int] = {}  # span id -> seq taken when the span started
        # Two instrumentations of one framework trace each call twice, in two span trees.
        # span id -> (instrumentation scope, start) of a reservation; a span of another scope
        # that ends first takes ("adopts") that seq, so the pair shares one number.
        self.reserved_by: dict[int, tuple[str, int]] = {}
        self.adopted: dict[int, tuple[str, int]] = {}  # reserving span id -> (adopter's span id hex, seq)
        self.recent: collections.deque[_Seen] = collections.deque(maxlen=RECENT_CALLS)  # tool calls tagged last
        # (start, end, scope, span id) of recent model spans: a twin from another instrumentation
        self.models: collections.deque[tuple[int, int, str, str]] = collections.deque(maxlen=RECENT_CALLS)
        self.scopes: set[str] = set()  # instrumentation scopes of its tool spans: twins need two
        self.budget_findings: list[Finding] = []
        # The first stop as the guard sees it: one a tool call brought, or the turn limit once a
        # later turn begins (the guard sees no model spans, so a cost budget stops nothing).
        self.stopped: Optional[Finding] = None
        self.stopped_mark: Optional[Finding] = None  # what every call after the stop is marked with
        # The turn budget's stop and the last turn it allows: marks the first call of a later turn.
        self.turn_limit: Optional[tuple[Finding, int]] = None
        # Per-tool caps reached: tool -> its stop, which marks every later call of that tool only.
        self.capped: dict[str, Finding] = {}

    def turn_at(self, start: int) -> Optional[int]:
        """The number of model decisions that ended before this call started."""
        if not self.model_ends and not self.models_forgotten:
            return None
        return self.models_forgotten + bisect.bisect_right(self.model_ends, start)

    def note_model_end(self, end: int) -> None:
        bisect.insort(self.model_ends, end)
        if len(self.model_ends) > MAX_MODEL_ENDS:
            # Keep counting turns: forget the oldest decisions but remember how many.
            drop = MAX_MODEL_ENDS // 8
            del self.model_ends[:drop]
            self.models_forgotten += drop


class Tagger:
    def __init__(self, policy: Fingerprinter | PolicySource, config: ProcessorConfig):
        self._source = PolicySource.of(policy) if isinstance(policy, Fingerprinter) else policy
        self._config = config
        self._runs: BoundedMap[str, _RunState] = BoundedMap(config.max_runs)
        self._lock = threading.Lock()
        # span id -> span id of the innermost agent span around it (agent_scopes only)
        self._scopes: BoundedMap[int, int] = BoundedMap(MAX_SCOPED_SPANS)
        self._warned_twice = False
        # Traces with a stop, until their root span passes (root.py); None: roots left as they are.
        self.root_marks: Optional[RootMarks] = RootMarks(config.max_runs) if config.mark_root else None
        # Inference spans noted at start and not yet ended (the span processor notes them)
        self.open_models = OpenModels(config.max_runs)
        # The span tree of traces where a manager agent lists managed agents (smolagents)
        self.managed = ManagedAgents(config.max_runs)

    @property
    def key_id(self) -> str:
        return self._source.fingerprinter.key_id

    @property
    def start_keys(self) -> Optional[frozenset[str]]:
        """Attribute keys a span must carry at start for `reserve` to do anything;
        None when every span matters (agent scopes follow every span's parent)."""
        return None if self._config.agent_scopes else TOOL_MARKER_KEYS

    def tag(self, span: ReadableSpan) -> ReadableSpan:
        """The span to export: a tagged copy for tool spans, the span itself otherwise."""
        if self.open_models.count:
            self.open_models.ended(span)  # in end order: calls that ended before it were numbered
        attrs = _attributes_copy(span)
        found = recognise(attrs, span.status.status_code == StatusCode.ERROR, span.name)
        if isinstance(found, ModelSpan):
            return self._model(span, attrs, found)
        delegated = False
        if not isinstance(found, ToolSpan):
            found = self._delegation(span, attrs)
            if found is None:
                return self.mark_root(span)  # an agent's root (`invoke_agent`) carries a marker key too
            delegated = True
        if conv.ARGS_DIGEST in attrs:
            return span  # tagged already (a second install)
        if target_unknown(found):
            # A handoff whose target is the agent that acts next (OpenLLMetry): its span has
            # ended before that agent starts, so it is left to the receiver and the audit,
            # which order the run first (conventions/handoffs.py).
            return span
        return self._call(span, attrs, found, delegated)

    def _call(self, span: ReadableSpan, attrs: dict[str, Any], found: ToolSpan, delegated: bool) -> ReadableSpan:
        """A tool call (or a delegation) to number, judge and tag."""
        ctx = span.context
        trace_hex = format(ctx.trace_id, "032x")
        # A handoff is the orchestration's action, not the agent's: never agent-scoped (each
        # agent invocation is a scope of its own, which would hide a ping-pong between them).
        run_id = self._run_id(span, attrs, trace_hex, scoped=not is_handoff(found.tool), by_parent=delegated)
        if attrs.get(conv.DISPATCHED) is False:
            return self._denied(span, attrs, found, run_id)
        scope = _scope(span)
        with self._lock:
            state = self._state(run_id)
            state.reserved_by.pop(ctx.span_id, None)
            seq = state.reserved.pop(ctx.span_id, 0)
            adopted = state.adopted.pop(ctx.span_id, None)
            # The detectors need calls in the order they observe them (end order); the
            # exported sequence may be the dispatch order taken at start.
            call = self._fingerprint(span, ctx, found, state, state.observed + 1, trace_hex)
            state.scopes.add(scope)
            two = len(state.scopes) > 1  # the usual run has one instrumentation: no twin to look for
            twin = _twin(state, call, scope) if two else None
            if twin is not None:  # the same call, traced by another instrumentation: counted once
                self._warn_twice(twin.scope, scope)
                tags = self._tags(call, found, run_id, adopted[1] if adopted else seq or twin.seq)
                tags[conv.DUPLICATE_OF] = twin.span_id
                return self._copy(span, attrs, tags, [])
            seq = seq or (two and _adopt(state, ctx.span_id, scope, span.end_time or 0)) or self._next_seq(state)
            state.recent.append(_Seen(call.tool, call.action, scope, call.start_ns or 0, call.end_ns or 0,
                                      format(ctx.span_id, "016x"), seq))
            state.observed += 1
            findings = self._observe(state, call)
            stopped = state.stopped
            numbered = state.seq
        self._to_root(ctx.trace_id, run_id == trace_hex, numbered, stopped, findings)
        return self._copy(span, attrs, self._tags(call, found, run_id, seq), findings)

    def _to_root(self, trace_id: int, own_run: bool, numbered: int, stopped: Optional[Finding] = None,
                 findings: Optional[list[Finding]] = None) -> None:
        """What the trace's root span will say: how many calls the trace's own run made (a run
        keyed otherwise, or agent-scoped, is not the trace's), and the stop, if any."""
        if self.root_marks is None:
            return
        if own_run:
            self.root_marks.count(trace_id, numbered)
        if findings:
            self.root_marks.note(trace_id, stopped, findings)

    def _warn_twice(self, first: str, second: str) -> None:
        if not self._warned_twice:
            self._warned_twice = True
            _log.warning("otel-loopguard: tool calls are traced twice, by %s and by %s (two instrumentations of "
                         "one framework are active); each is counted once and the second span is tagged "
                         "loopguard.duplicate_of, but uninstall one of them", first or "?", second or "?")

    def _denied(self, span: ReadableSpan, attrs: dict[str, Any], found: ToolSpan, run_id: str) -> ReadableSpan:
        """A call the guard denied (its span exists, nothing ran in it): numbered, tagged,
        never judged as a call, since it returned the guard's text, not a tool result."""
        with self._lock:
            state = self._state(run_id)
            state.reserved_by.pop(span.context.span_id, None)
            seq = state.reserved.pop(span.context.span_id, 0) or self._next_seq(state)
            turn = self._turn(state, span)
            numbered = state.seq
        self._to_root(span.context.trace_id, run_id == format(span.context.trace_id, "032x"), numbered)
        action = state.fp.action(found.tool, found.arguments).digest
        tags = {conv.TOOL_NAME: found.tool, conv.ARGS_DIGEST: action, conv.SEQ: seq, conv.SEQ_DENSE: True,
                conv.RUN_ID: run_id, conv.OUTCOME: "error", conv.KEY_ID: state.fp.key_id, conv.MODE: self._mode(run_id)}
        if turn is not None:
            tags[conv.TURN] = turn
        return self._copy(span, attrs, tags, [])

    def _mode(self, run_id: str) -> str:
        """`enforce` for a run an enforcing guard judged, else the mode install() resolved."""
        return span_mode(self._config.mode, run_id)

    @staticmethod
    def _next_seq(state: _RunState) -> int:
        state.seq += 1
        return state.seq

    def reserve(self, span: Any) -> None:
        """At span start (application thread): a span already marked as a tool call
        takes its sequence number now, in dispatch order. Others are numbered at end.
        With agent scopes, every span also inherits the agent scope it starts in."""
        plain = attributes_of(span)
        if self._config.agent_scopes:
            self._note_scope(span, plain)
        delegation = bool(plain) and self.managed.started(span, plain)
        if not delegation and (not plain or not any(_is(plain.get(c.marker), c.marker_values) for c in TOOL_CONVENTIONS)):
            return
        name = self._config.run_id_attribute
        if name and name not in plain:
            return  # the run is not known yet: numbered at end
        run_id = str(plain[name]) if name else format(span.context.trace_id, "032x")
        if not span.name.startswith(HANDOFF_SPAN_PREFIX):  # a handoff is never agent-scoped (tag)
            run_id = self._scoped(run_id, span, by_parent=delegation)
        with self._lock:
            state = self._state(run_id)
            if len(state.reserved) < MAX_RESERVED:
                state.reserved[span.context.span_id] = self._next_seq(state)
                scope = _scope(span)
                state.scopes.add(scope)
                state.reserved_by[span.context.span_id] = (scope, span.start_time or 0)

    def _run_id(self, span: ReadableSpan, attrs: dict[str, Any], trace_hex: Optional[str] = None,
                scoped: bool = True, by_parent: bool = False) -> str:
        """by_parent: the run of the agent scope the span starts in (a managed agent's span is
        a scope of its own, but its call is its manager's)."""
        name = self._config.run_id_attribute
        value = attrs.get(name) if name else None
        run_id = str(value) if value else trace_hex or format(span.context.trace_id, "032x")
        return self._scoped(run_id, span, by_parent) if scoped else run_id

    def _delegation(self, span: ReadableSpan, attrs: dict[str, Any]) -> Optional[ToolSpan]:
        """A managed agent's span as the call of that agent (delegations.py), else None."""
        if not self.managed.active:
            return None
        return self.managed.delegation(span, attrs, span.status.status_code == StatusCode.ERROR)

    def _note_scope(self, span: Any, attrs: Any) -> None:
        if any(_is(attrs.get(key), values) for key, values in AGENT_MARKERS):
            self._scopes.put(span.context.span_id, span.context.span_id)
            return
        parent = span.parent
        scope = self._scopes.get(parent.span_id) if parent is not None else None
        if scope is not None:
            self._scopes.put(span.context.span_id, scope)

    def _scoped(self, run_id: str, span: Any, by_parent: bool = False) -> str:
        """A subagent's calls are a run of their own: <run>/<agent span id>."""
        if not self._config.agent_scopes:
            return run_id
        parent = span.parent
        scope = self._scopes.get(parent.span_id if by_parent and parent is not None else span.context.span_id)
        return f"{run_id}/{scope:016x}" if scope is not None else run_id

    def _state(self, run_id: str) -> _RunState:
        state = self._runs.get(run_id)
        if state is None:
            state = _RunState(self._source.for_new_run(), run_id)
            self._runs.put(run_id, state)
        return state

    def _model(self, span: ReadableSpan, attrs: dict[str, Any], found: ModelSpan) -> ReadableSpan:
        """A model decision: counts the turn, prices the tokens for the cost budget."""
        start, end, scope = span.start_time or 0, span.end_time or 0, _scope(span)
        with self._lock:
            state = self._state(self._run_id(span, attrs))
            twin = next((i for b, e, s, i in state.models if s != scope and b <= end and start <= e), None)
            if twin is not None:  # the same model call, traced by another instrumentation: one turn
                attrs[conv.DUPLICATE_OF] = twin  # so the receiver and the audit count it once too
                return copy_span(span, _bounded(attrs, span.dropped_attributes), None)
            state.models.append((start, end, scope, format(span.context.span_id, "016x")))
            state.note_model_end(span.end_time or 0)
            model = ModelCall(turn=state.turn_at(span.end_time or 0) or 0, input_tokens=found.input_tokens,
                              output_tokens=found.output_tokens, model=found.model)
            for f in state.run.observe_model(model):
                if state.run.is_turn_limit(f):
                    state.turn_limit = (f, model.turn)
                else:
                    state.budget_findings.append(f)
        return span

    @staticmethod
    def _observe(state: _RunState, call: ToolCall) -> list[Finding]:
        # Budget findings from model spans surface on the next tool call's span. So do the
        # stops the guard can act on only at the next call (AT_NEXT_CALL_KINDS), and the turn
        # limit at the first call of a later turn: would_block marks the call enforce denies.
        pending = state.budget_findings
        stopped = state.stopped  # by an earlier call: enforce mode denies every call after it
        capped = state.capped.get(call.tool)  # a cap reached earlier: this tool's calls are denied
        released = _turn_limit_passed(state, call)
        new = state.run.observe(call)
        if not new and not pending and stopped is None and released is None and capped is None:
            return new  # the usual call: nothing found, nothing waiting
        limits = [f for f in new if state.run.is_turn_limit(f)]
        if limits:  # reached by this call's turn: held until a later turn begins
            state.turn_limit = (limits[0], call.turn or 0)
            new = [f for f in new if f not in limits]
        if released is not None:
            pending = pending + [released]
        if stopped is None:
            state.stopped = released or next((f for f in new if stops_run(f)), None)
            if state.stopped is not None:
                state.stopped_mark = _stopped_earlier(state.stopped)
        for f in new:
            if f.severity == STOP and f.kind in TOOL_LEVEL_KINDS and f.tool is not None:
                state.capped.setdefault(f.tool, f)
        at_next = [f for f in new if f.severity == STOP and f.kind in AT_NEXT_CALL_KINDS]
        state.budget_findings = [f for f in at_next if f.kind not in TOOL_LEVEL_KINDS]
        out = pending + [f for f in new if not (f.severity == STOP and f.kind in AT_NEXT_CALL_KINDS)]
        mark = state.stopped_mark if stopped is not None else capped
        if mark is not None and not any(f.severity == STOP for f in out):
            out.append(mark)
        return out

    def at_fork_reinit(self) -> None:
        """In a forked child: the parent's worker may have held the lock when it forked."""
        self._lock = threading.Lock()
        self.open_models.at_fork_reinit()
        self.managed.at_fork_reinit()
        if self.root_marks is not None:
            self.root_marks.at_fork_reinit()

    def mark_root(self, span: ReadableSpan) -> ReadableSpan:
        """A span that needs no tagging: the marked copy when it is a stopped run's root."""
        marks = self.root_marks
        return span if marks is None or not marks.waiting else marks.mark(span)

    def untagged(self, span: ReadableSpan) -> ReadableSpan:
        """A span passed on without tags (queue full, or tagging failed): still redacted."""
        if not self._config.redact or not any(k in (span.attributes or {}) for k in RAW_PAYLOAD_KEYS):
            return span
        attrs = {k: v for k, v in (span.attributes or {}).items() if k not in RAW_PAYLOAD_KEYS}
        return self._copy(span, attrs, {}, [])

    def _fingerprint(
        self, span: ReadableSpan, ctx: Any, found: ToolSpan, state: _RunState, seq: int, trace_hex: str
    ) -> ToolCall:
        parent = span.parent
        start = span.start_time
        raw = RawCall(
            seq=seq,
            tool=found.tool,
            arguments=found.arguments,
            result=found.result,
            ok=not found.error,
            turn=self._turn(state, span),
            call_id=found.call_id,
            span_id=format(ctx.span_id, "016x"),
            start_ns=start,
            end_ns=span.end_time,
            trace_id=trace_hex,
            parent_id=format(parent.span_id, "016x") if parent else None,
        )
        return fingerprint_call(raw, state.fp)

    def _turn(self, state: _RunState, span: ReadableSpan) -> Optional[int]:
        """The model decisions that ended before the call started; one more when a model span
        still open encloses it (open_models.py): its turn is the one that span's end counts."""
        turn = state.turn_at(span.start_time or 0)
        if self.open_models.count and self.open_models.encloses(span):
            return (turn or 0) + 1
        return turn

    def _copy(self, span: ReadableSpan, attrs: dict[str, Any], tags: dict[str, Any], findings: list[Finding]) -> ReadableSpan:
        if self._config.redact:
            for key in RAW_PAYLOAD_KEYS:
                attrs.pop(key, None)
        attrs.update(tags)
        return copy_span(span, _bounded(attrs, span.dropped_attributes), _events(span, findings))

    def _tags(self, call: ToolCall, found: ToolSpan, run_id: str, seq: int) -> dict[str, Any]:
        tags: dict[str, Any] = {
            conv.TOOL_NAME: call.tool,
            conv.ARGS_DIGEST: call.action,
            conv.SEQ: seq,
            conv.SEQ_DENSE: True,  # numbered 1..N per run: a gap is a missing span
            conv.RUN_ID: run_id,
            # The span's error, or a failure its result reports (an exit code: docs/equivalence.md).
            conv.OUTCOME: "error" if found.error or call.ok is False else "ok",
            conv.KEY_ID: self.key_id,
            conv.MODE: self._mode(run_id),
        }
        if call.equivalence is not NO_EQUIVALENCE:  # keyed sketches, never content
            tags.update(sketch_attributes(call.equivalence))
        if call.result is not None:
            tags[conv.RESULT_DIGEST] = call.result
            if call.exact is not None:  # masking changed it: the unmasked one for novelty downstream
                tags[conv.RESULT_EXACT_DIGEST] = call.exact
        if call.turn is not None:
            tags[conv.TURN] = call.turn
        return tags


class _Seen(NamedTuple):
    tool: str
    action: str
    scope: str
    start: int
    end: int
    span_id: str
    seq: int


def _scope(span: Any) -> str:
    scope = getattr(span, "instrumentation_scope", None)
    return getattr(scope, "name", "") or ""


def _twin(state: _RunState, call: ToolCall, scope: str) -> Optional[_Seen]:
    """A call tagged just before by another instrumentation, the two spans overlapping in
    time: the same tool with the same arguments, else the same tool (instrumentations record
    arguments differently: OpenInference keeps a LangChain tool's single argument as a bare
    value, so the digests differ). One instrumentation's own parallel calls are siblings,
    never twins (same scope). A twin pairs once: it leaves the recent calls."""
    start, end = call.start_ns or 0, call.end_ns or 0
    candidates = [seen for seen in state.recent
                  if seen.scope != scope and seen.tool == call.tool and seen.start <= end and start <= seen.end]
    if not candidates:
        return None
    twin = next((seen for seen in candidates if seen.action == call.action), candidates[0])
    state.recent.remove(twin)
    return twin


def _adopt(state: _RunState, span_id: int, scope: str, end: int) -> int:
    """A span numbered at its end takes the reservation of an open span of another scope
    that started before it ended (its probable twin, numbered at start); 0 when none."""
    for other, (other_scope, start) in state.reserved_by.items():
        if other_scope != scope and start <= end:
            del state.reserved_by[other]
            seq = state.reserved.pop(other)
            state.adopted[other] = (format(span_id, "016x"), seq)
            return seq
    return 0


def _is(value: Any, values: frozenset[str]) -> bool:
    return isinstance(value, str) and value in values


def _attributes_copy(span: ReadableSpan) -> dict[str, Any]:
    """A plain dict of the span's attributes: BoundedAttributes.copy() (behind the read-only
    view `span.attributes`) copies its dict in C."""
    view: Any = span.attributes or _NO_ATTRIBUTES
    try:
        attrs = view.copy()
    except AttributeError:  # a mapping of another kind, without copy()
        return dict(view)
    return attrs if type(attrs) is dict else dict(attrs)


def _bounded(attrs: dict[str, Any], dropped: int) -> Attributes:
    if not dropped:
        # The values were validated when the application set them, and ours are plain
        # str/int: a read-only view spares re-validating every attribute.
        return MappingProxyType(attrs)
    from opentelemetry.attributes import BoundedAttributes

    bounded = BoundedAttributes(maxlen=None, attributes=attrs, immutable=True)
    bounded.dropped = dropped  # what the SDK dropped from the original still counts
    return bounded


def _turn_limit_passed(state: _RunState, call: ToolCall) -> Optional[Finding]:
    """The turn budget's stop, once a call of a turn beyond the last one allowed comes: the
    call enforce mode denies first (the last turn's own calls run)."""
    if state.turn_limit is None or call.turn is None or call.turn <= state.turn_limit[1]:
        return None
    found, state.turn_limit = state.turn_limit[0], None
    return found


def _stopped_earlier(stopped: Finding) -> Finding:
    """The mark for a call after the run was stopped: enforce mode denies it too (the run
    stays stopped), so observe-only must say would_block, or a rollout review undercounts.
    One per run (a looping run may go on for thousands of calls), with only what the decision
    event shows: kind, severity, reason, policy version."""
    return replace(stopped, severity=STOP, seqs=(), span_ids=(), reason=f"{STOPPED_EARLIER}{stopped.reason}",
                   action=None)


def _events(span: ReadableSpan, findings: list[Finding]) -> Any:
    """The span's events with a decision event per stop or warning; None: unchanged."""
    if not findings:
        return None
    decisions = [f for f in findings if f.severity in (STOP, WARN)]
    if not decisions:
        return None
    events: Any = BoundedList(None)  # the SDK's own type for a span's events (no type parameter)
    events.extend(span.events)
    events.dropped = span.dropped_events
    for f in decisions:
        events.append(Event(DECISION_EVENT, _decision(f), span.end_time))
    return events


@functools.lru_cache(maxsize=1024)  # a stopped run marks every later call alike; event attributes are read-only
def _decision(f: Finding) -> Any:
    """What enforce mode would have done at this call: block on stop, nudge on warn."""
    from opentelemetry.attributes import BoundedAttributes

    return BoundedAttributes(maxlen=None, immutable=True, attributes={  # shared by the events it marks
        "loopguard.decision": "would_block" if f.severity == STOP else "would_warn",
        "loopguard.finding.kind": f.kind,
        "loopguard.finding.severity": f.severity,
        "loopguard.finding.reason": f.reason,
        "loopguard.policy.version": f.policy_version,
    })
