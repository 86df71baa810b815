"""One OTLP request -> compact per-span facts, reading only what matters.

Every span gives its ids, parent, times and a content id (for dedupe). Only
spans whose marker attributes say "tool call", "model call" or "run facts" get
the attributes the conventions read decoded (an OpenInference LLM span also its
record of the conversation, found by key shape: scans.py); every OpenInference
span its kind, and an agent span its managed agents, for its run's span tree
(TreeNote: delegations); every other attribute of every span is never touched.
Invalid spans are rejected with a reason.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Optional

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ...calls import GuardEvent, ModelCall, RawCall
from ...conventions import ModelSpan, ToolSpan, recognise
from ...conventions.conversation import requested_calls
from ...conventions.delegations import SPAN_KINDS, candidate, declared_agents, kind_of
from ...conventions.recognise import TOOL_NAME_FALLBACKS, agent_of
from ...conventions import attributes as conv
from ...conventions.sketches import SKETCH_KEYS
from ...conventions.spec import (AGENT_CONVENTIONS, LANGGRAPH_HANDOFF, MARKED_HANDOFFS, MODEL_CONVENTIONS, OPENINFERENCE_HANDOFF,
                                SMOLAGENTS_MANAGED, TASK_TOOL_CONVENTIONS, TOOL_CONVENTIONS, TOOL_EXTRA_KEYS)
from ...findings.otlp import is_own_span
from ...native import module as native_module
from ...otlp.lite import LiteRequest, RawSpansRequest, hidden_attributes, status_code
from ...otlp.spans import DECISION_EVENT, hex_id, raw_call, run_id_of
from ...otlp.values import any_value, attributes
from .scans import CONVERSATION, OVERFLOW, SCANS, marked, plain as plain_scans, scanned


_log = logging.getLogger("otel_loopguard.receiver")
_RUN_KEYS = (conv.RUN_ID, conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE)
_MARKER_KEYS = tuple(dict.fromkeys(c.marker for c in (*TOOL_CONVENTIONS, *MARKED_HANDOFFS, *MODEL_CONVENTIONS,
                                                      *AGENT_CONVENTIONS)))
# What recognise() and raw_call() read, per convention: no other attribute is decoded, so a
# span's cost does not grow with its attribute count (LLM spans carry hundreds). Every plan
# holds all markers and the tagged-tool name, so recognise() makes the same choice on the
# values read as on all the span's attributes.
_COMMON = (*_MARKER_KEYS, conv.TOOL_NAME, *_RUN_KEYS)
_CALL_KEYS = (conv.SEQ, conv.SEQ_DENSE, conv.TURN, conv.DISPATCHED, conv.GUARD, conv.ARGS_DIGEST, conv.RESULT_DIGEST,
              conv.RESULT_EXACT_DIGEST, conv.KEY_ID, conv.OUTCOME, conv.DUPLICATE_OF, "error.type", *TOOL_NAME_FALLBACKS,
              *SKETCH_KEYS)


def _plan(*keys: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*_COMMON, *keys)))


_FACTS_PLAN = (*_RUN_KEYS, conv.RUN_CALLS)
_FACTS_KEYS = (conv.TERMINATION_REASON, conv.TERMINAL_RESPONSE, conv.RUN_CALLS)  # any one: a span of run facts
_TAGGED_PLAN = _plan(*_CALL_KEYS)
_TOOL_PLANS = {c.name: _plan(c.tool, *c.call_id, *c.arguments, *c.result, *_CALL_KEYS, *TOOL_EXTRA_KEYS)
               for c in TOOL_CONVENTIONS}
# A LangGraph handoff tool names its source agent in metadata (conventions/spec.py): read only
# for a tool span whose result is a Command to the parent graph (metadata can be long).
_LANGGRAPH_KEYS = (*LANGGRAPH_HANDOFF.source, *LANGGRAPH_HANDOFF.source_in_metadata, *LANGGRAPH_HANDOFF.namespace)
_RESULT_KEYS = tuple(dict.fromkeys(k for c in TOOL_CONVENTIONS for k in c.result))
_MODEL_PLANS = {c.name: _plan(*c.model, *c.input_tokens, *c.output_tokens, conv.DUPLICATE_OF) for c in MODEL_CONVENTIONS}
# A `task` span is a tool call only with a tool name, else maybe a model call: its plan reads both.
_MODEL_KEYS = tuple(k for p in _MODEL_PLANS.values() for k in p)
_TASK_PLANS = {c.name: _plan(c.tool, *c.call_id, *c.arguments, *c.result, *_CALL_KEYS, *_MODEL_KEYS)
               for c in TASK_TOOL_CONVENTIONS}
_HANDOFF_PLANS = {c.name: _plan(*c.from_agent, *c.to_agent, *_CALL_KEYS) for c in MARKED_HANDOFFS}
# An agent span is often a trace's root: the processor's count of the run's calls is read there too.
_AGENT_PLANS = {c.name: _plan(*c.agent, conv.RUN_CALLS) for c in AGENT_CONVENTIONS}
# Every other OpenInference span, for its run's span tree (delegations): an agent span as a
# candidate call (its input and output) and its list of managed agents (scans.py); the others
# for their parent and kind only. Last in rank: a span any convention reads gets that one's
# plan, and one with a tool name the tagged plan (_plan_of), so these need not hold the other
# markers (recognise() finds nothing in them either way): the kind, run id and run facts.
_LINK_PLAN = (SMOLAGENTS_MANAGED.marker, *_FACTS_PLAN)
_MANAGED_PLAN = (*_LINK_PLAN, *SMOLAGENTS_MANAGED.arguments, *SMOLAGENTS_MANAGED.result)


def _marker_plans() -> tuple[tuple[str, dict[str, tuple[int, tuple[str, ...]]]], ...]:
    """marker key -> {marker value -> (rank, plan)}. The rank is recognise()'s precedence:
    tool conventions in order, then handoffs with a marker of their own, then a tagged tool,
    then tool conventions that need a tool name (`task`), then model conventions in order, then agent spans (recognise() finds nothing in them:
    agent_of() is asked). (An OpenInference handoff is a TOOL span: its tool plan reads
    input.value and output.value, the agents.)"""
    out: dict[str, dict[str, tuple[int, tuple[str, ...]]]] = {}
    for rank, c in enumerate(TOOL_CONVENTIONS):
        out.setdefault(c.marker, {}).update(dict.fromkeys(c.marker_values, (rank, _TOOL_PLANS[c.name])))
    for rank, h in enumerate(MARKED_HANDOFFS, start=len(TOOL_CONVENTIONS)):
        out.setdefault(h.marker, {}).update(dict.fromkeys(h.marker_values, (rank, _HANDOFF_PLANS[h.name])))
    for rank, t in enumerate(TASK_TOOL_CONVENTIONS, start=_TAGGED_RANK + 1):
        for value in t.marker_values:
            out.setdefault(t.marker, {}).setdefault(value, (rank, _TASK_PLANS[t.name]))
    for rank, m in enumerate(MODEL_CONVENTIONS, start=_TAGGED_RANK + 1 + len(TASK_TOOL_CONVENTIONS)):
        out.setdefault(m.marker, {}).update(dict.fromkeys(m.marker_values, (rank, _MODEL_PLANS[m.name])))
    for rank, a in enumerate(AGENT_CONVENTIONS, start=_TAGGED_RANK + 1 + len(TASK_TOOL_CONVENTIONS) + len(MODEL_CONVENTIONS)):
        for value in a.marker_values:
            out.setdefault(a.marker, {}).setdefault(value, (rank, _AGENT_PLANS[a.name]))
    rank = _TAGGED_RANK + 1 + len(TASK_TOOL_CONVENTIONS) + len(MODEL_CONVENTIONS) + len(AGENT_CONVENTIONS)
    for value in sorted(SPAN_KINDS):
        plan = _MANAGED_PLAN if value in SMOLAGENTS_MANAGED.marker_values else _LINK_PLAN
        out.setdefault(SMOLAGENTS_MANAGED.marker, {}).setdefault(value, (rank, plan))
    return tuple(out.items())


_TAGGED_RANK = len(TOOL_CONVENTIONS) + len(MARKED_HANDOFFS)
_MARKERS = _marker_plans()
# The OpenInference kinds read for the span tree only, and the keys of their plans: values with
# no other key come from those plans, and recognise() and agent_of() find nothing in them
# (tests/receiver/test_decode.py), so judge() does not ask.
_TREE_KINDS = frozenset(value for key, plans in _MARKERS if key == SMOLAGENTS_MANAGED.marker
                        for value, (_, plan) in plans.items() if plan is _LINK_PLAN or plan is _MANAGED_PLAN)
_TREE_KEYS = frozenset(_MANAGED_PLAN)
_HANDOFF_NAME = OPENINFERENCE_HANDOFF.span_name_prefix
# Any of these present makes a span worth a closer look (markers, a tagged tool, run facts).
_ANY_KEYS = (*_MARKER_KEYS, conv.TOOL_NAME, *_FACTS_KEYS)
_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value", "bytes_value"})
_ERROR = Status.STATUS_CODE_ERROR
# Our own finding and run spans are never judged again (they carry loopguard.tool.name):
# a pipeline that routes them back through the receiver must not see loops made of findings.
# Known by name, bare or with detail (`loopguard.finding stop repeat lookup_order`).
_OWN_PREFIX = "loopguard."


def _own(name: str) -> bool:
    return name.startswith(_OWN_PREFIX) and is_own_span(name)
_DECISION = DECISION_EVENT.encode()
_ZERO_TRACE, _ZERO_SPAN = b"\x00" * 16, b"\x00" * 8


class TooManySpans(ValueError):
    """A request holds more spans than the receiver takes in one (max_request_spans)."""

    def __init__(self, count: int, limit: int):
        super().__init__(f"the request holds {count} spans, more than this receiver takes in one request "
                         f"({limit}, max_request_spans): send smaller batches (the SDK's batch processor: "
                         "max_export_batch_size; the Collector: the batch processor's send_batch_max_size)")
        self.count, self.limit = count, limit


@dataclass(slots=True)
class Decoded:
    where: tuple[int, int, int]  # resource, scope, span index in the request
    key: bytes  # trace id + span id
    content: int
    trace_id: bytes
    span_id: bytes
    parent: bytes
    start: int
    end: int
    run_id: Optional[str] = None
    call: Optional[RawCall] = None
    model: Optional[ModelCall] = None
    facts: Optional[dict[str, Any]] = None
    guards: Optional[list[GuardEvent]] = None
    agent: Optional[str] = None  # an agent span's agent: a waiting handoff's target
    tree: Optional["TreeNote"] = None  # an OpenInference span: its place in its run's span tree


@dataclass(slots=True, kw_only=True)  # not frozen: built for every OpenInference span (calls.py says why)
class TreeNote:
    """An OpenInference span as its run's delegations need it (conventions/delegations.py):
    its kind, and for an agent span the agents it manages and itself as a candidate call.
    Never changed once built: the notes of spans that are not agents are shared (_link_note)."""

    run_id: str
    kind: str  # kind_of(): agent, tool, other
    declared: frozenset[str] = frozenset()
    candidate: Optional[tuple[str, "Candidate"]] = None  # (agent, the call it would be)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """An agent span `<agent>.<method>` as the call of that agent it would be: made into one
    (`call()`) only once its manager is known to list it. Unwrapping its input and output costs
    more than the rest of its decode, and most agent spans are no delegation."""

    name: str
    error: bool
    trace_id: bytes
    span_id: bytes
    parent: bytes
    start: int
    end: int
    values: dict[str, Any]  # its plan values, never changed after decode

    def call(self) -> RawCall:
        tool = candidate(self.name, self.values, self.error)
        assert tool is not None  # made only for a name with an agent part (_tree_note)
        return raw_call(hex_id(self.trace_id), self.span_id.hex(), hex_id(self.parent), self.start, self.end,
                        self.values, tool)


@dataclass
class DecodedRequest:
    spans: list[Decoded]
    rejected: list[tuple[tuple[int, int, int], str]]  # where, why


def decode_python(data: bytes, run_id_attribute: Optional[str] = None, max_spans: Optional[int] = None
                  ) -> DecodedRequest:
    """decode() (decoder.py) on protobuf's parser: the reference the native decoder is held to."""
    request = LiteRequest.FromString(data)
    if max_spans is not None:
        count = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        if count > max_spans:
            raise TooManySpans(count, max_spans)
    extra = (run_id_attribute,) if run_id_attribute else ()
    out = DecodedRequest(spans=[], rejected=[])
    raw = _RawSpans(data)
    # A guard decision is an event named loopguard.decision: a request without that text
    # has none, and its spans' events need not be looked at.
    decisions = _DECISION in data
    for r, rs in enumerate(request.resource_spans):
        for s, ss in enumerate(rs.scope_spans):
            for i, span in enumerate(ss.spans):
                trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
                if (len(trace_id) != 16 or len(span_id) != 8 or len(parent) not in (0, 8)
                        or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN):
                    out.rejected.append(((r, s, i), _why(span)))
                    continue
                d = Decoded(where=(r, s, i), key=trace_id + span_id, content=0, trace_id=trace_id, span_id=span_id,
                            parent=parent, start=span.start_time_unix_nano, end=span.end_time_unix_nano)
                try:  # inline, not a helper: this loop runs once per span of every request
                    _read_span(d, span, _full_attributes(raw(r, s, i)) if hidden_attributes(span) else span.attributes,
                               extra, run_id_attribute, decisions)
                except Exception:
                    _unreadable(d, span)
                out.spans.append(d)
    return out


def _unreadable(d: Decoded, span: Any) -> None:
    """A span we cannot make sense of is passed on unjudged, never allowed to cost the rest
    of its request (or the request an answer). Its content id is what every span's begins
    with, which no encoder changes."""
    _log.exception("span %s of trace %s could not be read; forwarded, not judged", d.span_id.hex(), d.trace_id.hex())
    d.content = hash((d.start, d.end, d.parent, span.name, status_code(span), len(span.attributes)))
    d.run_id = d.call = d.model = d.facts = d.guards = d.agent = d.tree = None


class _RawSpans:
    """A span's own bytes, for the rare span the map view cannot show whole: the request is
    parsed again, once, with each span left as bytes."""

    __slots__ = ("_data", "_request")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._request: Any = None

    def __call__(self, r: int, s: int, i: int) -> bytes:
        if self._request is None:
            self._request = RawSpansRequest.FromString(self._data)
        return bytes(self._request.resource_spans[r].scope_spans[s].spans[i])


def _full_attributes(raw: bytes) -> dict[str, Any]:
    """Attributes as the full schema parses them: for a span whose KeyValues carry fields
    newer than ours (the map view would hide them). In wire order, last one wins, as in
    the map."""
    return {kv.key: kv.value for kv in Span.FromString(raw).attributes}


def _guard_events(events: Any) -> Optional[list[GuardEvent]]:
    return guard_events((event.time_unix_nano, attributes(event.attributes)) for event in events
                        if event.name == DECISION_EVENT)


def guard_events(decisions: Iterable[tuple[int, dict[str, Any]]]) -> Optional[list[GuardEvent]]:
    """Guard decisions recorded as span events (docs/guard.md), from the (time, attributes)
    of the span's events named loopguard.decision; None when there are none."""
    out = []
    for time_ns, e in decisions:
        if e.get("loopguard.decision") in ("deny", "would_block") and "loopguard.dispatched" in e:
            kind, tool = e.get("loopguard.finding.kind"), e.get("loopguard.tool.name")
            out.append(GuardEvent(time_ns=time_ns, kind=str(kind) if kind else None,
                                  dispatched=bool(e["loopguard.dispatched"]), tool=str(tool) if tool else None))
    return out or None


def _why(span: Any) -> str:
    return rejected_because(span.name, span.trace_id, span.span_id, span.parent_span_id)


def rejected_because(name: str, trace_id: bytes, span_id: bytes, parent: bytes) -> str:
    """Why a span with these ids is rejected."""
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE:
        return f"span {name!r}: trace_id must be 16 non-zero bytes (got {len(trace_id)})"
    if len(span_id) != 8 or span_id == _ZERO_SPAN:
        return f"span {name!r}: span_id must be 8 non-zero bytes (got {len(span_id)})"
    return f"span {name!r}: parent_span_id must be empty or 8 bytes (got {len(parent)})"


def _plan_of(attrs: Any) -> Optional[tuple[str, ...]]:
    """The keys to read: those of the convention recognise() will pick, from C-level map
    lookups only; None for every other span (most spans carry no marker at all)."""
    for key in _ANY_KEYS:
        if key in attrs:
            break
    else:
        return None
    best: Optional[tuple[int, tuple[str, ...]]] = None
    for key, plans in _MARKERS:
        value = attrs.get(key)
        if value is not None:
            found = plans.get(value.string_value)  # "" for a value of another type: no marker
            if found is not None and (best is None or found[0] < best[0]):
                best = found
    if conv.TOOL_NAME in attrs and (best is None or best[0] > _TAGGED_RANK):
        return _TAGGED_PLAN
    if best is None:
        # Spelt out, not any(): asked of most spans of every request.
        facts = conv.TERMINATION_REASON in attrs or conv.TERMINAL_RESPONSE in attrs or conv.RUN_CALLS in attrs
        return _FACTS_PLAN if facts else None
    return best[1]


def _values(attrs: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        if key in attrs:
            value = attrs[key]
            text = value.string_value  # most values are non-empty strings: one read settles them
            if text:
                out[key] = text
                continue
            which = value.WhichOneof("value")
            out[key] = getattr(value, which) if which in _SCALARS else any_value(value)
    return out


def _is_command(values: dict[str, Any]) -> bool:
    for key in _RESULT_KEYS:
        value = values.get(key)
        if value.__class__ is str and value.startswith(LANGGRAPH_HANDOFF.result_prefixes):
            return True
    return False


def _content(values: dict[str, Any]) -> int:
    """The attributes judged, as part of the content id. Strings as they are; any other
    value as its text in a 1-tuple, since numbers hash by value (1, 1.0 and True alike; -1
    and -2 alike; NaN by identity, so never equal again) and no string equals a tuple."""
    return hash((tuple(values), tuple([v if v.__class__ is str else (repr(v),) for v in values.values()])))


def _read_span(d: Decoded, span: Any, attrs: Any, extra: tuple[str, ...], run_attr: Optional[str],
               decisions: bool = True) -> None:
    name = span.name
    status = status_code(span)
    # Content id for dedupe: what a re-delivery repeats even through another encoder
    # (which may write empty fields or order them differently), so it is a duplicate,
    # while a different span under the same id is a conflict.
    d.content = hash((d.start, d.end, d.parent, name, status, len(attrs)))
    # Whether it is our own span is asked only of spans with events or a plan (a few in a
    # request): the others, most spans, pay nothing for it.
    if decisions and span.events and not _own(name):
        d.guards = _guard_events(span.events)
        if d.guards:
            # The same run as the audit puts them in: loopguard.run.id or the configured attribute.
            d.run_id = run_id_of(_values(attrs, (conv.RUN_ID, *((run_attr,) if run_attr else ()))), d.trace_id, run_attr)
    plan = _plan_of(attrs)
    if plan is None or _own(name):
        return
    values = _values(attrs, plan + extra if extra else plan)
    if _is_command(values):
        values.update(_values(attrs, _LANGGRAPH_KEYS))
    for scan in SCANS:  # keys found by shape, in the few spans whose marker asks (scans.py)
        if marked(values, scan):
            keys = scanned(attrs, scan)
            if keys is None:
                values[OVERFLOW] = True
            else:
                values.update(_values(attrs, tuple(keys)))
    judge(d, name, status, values, run_attr)


def finish(d: Decoded, name: str, status: int, values: Optional[dict[str, Any]],
           decisions: Optional[list[tuple[int, dict[str, Any]]]], run_values: dict[str, Any],
           run_attr: Optional[str]) -> None:
    """_read_span's steps after the reading, for a span the native decoder read: `values` are
    its plan's (None without a plan), `decisions` its loopguard.decision events' (time,
    attributes) (None without any), `run_values` the run id attributes' when it has some."""
    own = _own(name)
    if decisions is not None and not own:
        d.guards = guard_events(decisions)
        if d.guards:
            d.run_id = run_id_of(run_values, d.trace_id, run_attr)
    if values is not None and not own:
        judge(d, name, status, values, run_attr)


def judge(d: Decoded, name: str, status: int, values: dict[str, Any], run_attr: Optional[str]) -> None:
    """What the conventions make of a span's plan values: a call, a model call, an agent, run facts."""
    d.content = hash((d.content, _content(values)))  # the attributes judged are part of what must match
    marker = values.get(SMOLAGENTS_MANAGED.marker)
    tree_only = marker.__class__ is str and marker in _TREE_KINDS and _TREE_KEYS.issuperset(values)
    # Only an OpenInference handoff is told by its name (conventions/spec.py).
    found = (None if tree_only else recognise(values, status == _ERROR, name) if name.startswith(_HANDOFF_NAME)
             else recognise(values, status == _ERROR))
    # Spelt out once, not any() twice: asked of every span judged (_FACTS_KEYS).
    facts = conv.TERMINATION_REASON in values or conv.TERMINAL_RESPONSE in values or conv.RUN_CALLS in values
    kind = kind_of(values)
    if kind is not None:
        d.tree = _tree_note(d, name, status, values, kind, run_attr)
    if found is None:
        d.agent = None if tree_only else agent_of(values)
        if d.agent is None and not facts:
            return
    d.run_id = run_id_of(values, d.trace_id, run_attr)
    if isinstance(found, ToolSpan):
        d.call = raw_call(hex_id(d.trace_id), d.span_id.hex(), hex_id(d.parent), d.start, d.end, values, found)
    elif isinstance(found, ModelSpan):
        d.model = ModelCall(turn=0, input_tokens=found.input_tokens, output_tokens=found.output_tokens,
                            model=found.model, end_ns=d.end)
        if marked(values, CONVERSATION) and OVERFLOW not in values:
            # Its record, for calls it turns out to be the parent of (otlp/order.enclosed_turns).
            d.model.span_id, d.model.requested = d.span_id.hex(), requested_calls(values)
    if facts:
        d.facts = {k: values[k] for k in _FACTS_KEYS if k in values}


def _tree_note(d: Decoded, name: str, status: int, values: dict[str, Any], kind: str,
               run_attr: Optional[str]) -> TreeNote:
    run_id = run_id_of(values, d.trace_id, run_attr)
    if kind != "agent":
        return _link_note(run_id, kind)
    declared = frozenset() if OVERFLOW in values else declared_agents(values)
    agent = name.rpartition(".")[0]
    call = None if not agent else (agent, Candidate(name=name, error=status == _ERROR, trace_id=d.trace_id,
                                                    span_id=d.span_id, parent=d.parent, start=d.start, end=d.end,
                                                    values=values))
    return TreeNote(run_id=run_id, kind=kind, declared=declared, candidate=call)


@lru_cache(maxsize=1024)
def _link_note(run_id: str, kind: str) -> TreeNote:
    """One note for every span of a kind in a run: the spans of a trace share their run."""
    return TreeNote(run_id=run_id, kind=kind)


def reading_plans() -> dict[str, Any]:
    """The plans above as plain data, for the native decoder (decode_native.py): which spans
    are read, and which of their attributes, is decided here alone."""
    return {
        "any_keys": list(_ANY_KEYS),
        "markers": [(key, [(value, rank, list(plan)) for value, (rank, plan) in plans.items()])
                    for key, plans in _MARKERS],
        "scans": plain_scans(),
        "scan_overflow": OVERFLOW,
        "tool_name": conv.TOOL_NAME,
        "tagged_rank": _TAGGED_RANK,
        "tagged_plan": list(_TAGGED_PLAN),
        "facts_plan": list(_FACTS_PLAN),
        "facts_keys": list(_FACTS_KEYS),
        "result_keys": list(_RESULT_KEYS),
        "result_prefixes": list(LANGGRAPH_HANDOFF.result_prefixes),
        "langgraph_keys": list(_LANGGRAPH_KEYS),
        "run_id_key": conv.RUN_ID,
        "decision": DECISION_EVENT,
    }


def path() -> str:
    """"native" when the receiver's decode() (decoder.py) takes the Rust module's decoder, else "python"."""
    return "python" if native_module() is None else "native"
