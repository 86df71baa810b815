"""Spans of OTLP requests -> tool calls and model decisions per run.

Tool spans keep `loopguard.seq` / `loopguard.turn` when the processor set them.
Otherwise the sequence follows start time (then span id), and a call's turn is
the number of model spans of the run that ended before it started, or, under a
model span that is its parent, the turn its record of the conversation gives
(otlp/order.py, `enclosed_turns`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Mapping, Optional

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ..calls import LOCAL_KEY, TERMINATION_REASONS, GuardEvent, ModelCall, RawCall, RecordedDecision, RunFacts
from ..conventions.sketches import from_attributes
from ..conventions import ModelSpan, ToolSpan, recognise
from ..conventions.recognise import agent_of
from ..conventions.conversation import requested_calls
from ..conventions import attributes as conv
from ..conventions.handoffs import resolve_targets, unresolved
from .delegations import DelegationTree
from .order import enclosed_turns, order_calls
from .values import attributes

_ERROR = Status.STATUS_CODE_ERROR
DECISION_EVENT = "loopguard.decision"


@dataclass(frozen=True)
class _Model:
    end_ns: int
    call: ModelCall
    span_id: str = ""
    requested: Mapping[str, int] = field(default_factory=dict)  # conventions/conversation.py


class SpanCollector:
    """Accumulates spans (from any number of requests), then yields runs."""

    def __init__(self, run_id_attribute: Optional[str] = None) -> None:
        self._run_attr = run_id_attribute
        self._tools: dict[str, list[RawCall]] = {}
        self._models: dict[str, list[_Model]] = {}
        self._facts: dict[str, RunFacts] = {}
        self._guards: dict[str, list[GuardEvent]] = {}
        self._agents: dict[str, list[tuple[int, str]]] = {}  # agent spans: (start, agent), for handoffs' targets
        # Every decision event, placed later by its span or time: (span id, time, attributes).
        self._decisions: dict[str, list[tuple[str, int, dict[str, Any]]]] = {}
        self.tool_calls = 0  # tool spans seen so far (the audit says which files held none)
        self.sources: dict[str, dict[Any, None]] = {}  # run id -> where its spans came from, in order
        self._source: Any = None
        self._tree = DelegationTree()  # managed agents' runs as calls (otlp/delegations.py)

    def add(self, request: ExportTraceServiceRequest, source: Any = None) -> None:
        """`source`: where the request came from (the audit's file), noted for each run it has spans of."""
        self._source = source
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    self._add_span(span)

    def _add_span(self, span: Span) -> None:
        attrs = attributes(span.attributes)
        run_id = run_id_of(attrs, span.trace_id, self._run_attr)
        if self._source is not None:
            self.sources.setdefault(run_id, {})[self._source] = None
        self._note_facts(run_id, attrs)
        self._note_guards(run_id, span)
        found = recognise(attrs, span.status.code == _ERROR, span.name)
        if isinstance(found, ToolSpan):
            self._tools.setdefault(run_id, []).append(span_call(span, attrs, found))
            self.tool_calls += 1
        elif isinstance(found, ModelSpan):
            model = ModelCall(turn=0, input_tokens=found.input_tokens, output_tokens=found.output_tokens,
                              model=found.model, end_ns=span.end_time_unix_nano)
            self._models.setdefault(run_id, []).append(
                _Model(span.end_time_unix_nano, model, span.span_id.hex(), requested_calls(attrs)))
        else:
            agent = agent_of(attrs)
            if agent is not None:
                self._agents.setdefault(run_id, []).append((span.start_time_unix_nano, agent))
        self._tree.note(run_id, span, attrs, span_call)

    def _note_guards(self, run_id: str, span: Span) -> None:
        for event in span.events:
            if event.name != DECISION_EVENT:
                continue
            e = attributes(event.attributes)
            self._decisions.setdefault(run_id, []).append((span.span_id.hex(), event.time_unix_nano, e))
            if e.get("loopguard.decision") in ("deny", "would_block") and "loopguard.dispatched" in e:
                self._guards.setdefault(run_id, []).append(GuardEvent(
                    time_ns=event.time_unix_nano, kind=_str(e.get("loopguard.finding.kind")),
                    dispatched=bool(e.get("loopguard.dispatched")), tool=_str(e.get("loopguard.tool.name"))))

    def guard_events(self, run_id: str) -> list[GuardEvent]:
        return self._guards.get(run_id, [])

    def decisions(self, run_id: str, calls: list[RawCall]) -> list[RecordedDecision]:
        """The run's decision events, each at the call whose span carries it, else (an event
        on another span: a denied call has none) at the first call that started after it."""
        by_span = {c.span_id: c.seq for c in calls if c.span_id}
        starts = sorted((c.start_ns, c.seq) for c in calls if c.start_ns is not None)
        out = []
        for span_id, time_ns, e in self._decisions.get(run_id, []):
            seq = by_span.get(span_id)
            if seq is None:
                seq = next((s for start, s in starts if start > time_ns), None)
            out.append(RecordedDecision(
                verb=_str(e.get("loopguard.decision")) or "unknown", kind=_str(e.get("loopguard.finding.kind")),
                tool=_str(e.get("loopguard.tool.name")), seq=seq, reason=_str(e.get("loopguard.finding.reason")),
                policy_version=_str(e.get("loopguard.policy.version"))))
        return out

    def _note_facts(self, run_id: str, attrs: dict[str, Any]) -> None:
        reason = attrs.get(conv.TERMINATION_REASON)
        terminal = attrs.get(conv.TERMINAL_RESPONSE)
        if reason is None and terminal is None:
            return
        facts = self._facts.get(run_id, RunFacts())
        if reason in TERMINATION_REASONS:
            facts = replace(facts, termination_reason=reason)
        if isinstance(terminal, bool):
            facts = replace(facts, terminal_response=terminal)
        self._facts[run_id] = facts

    def runs(self) -> list[tuple[str, list[RawCall], list[ModelCall], Optional[RunFacts]]]:
        out = []
        for run_id in dict.fromkeys([*self._tools, *self._models, *self._guards]):
            models = sorted(self._models.get(run_id, []), key=lambda m: m.end_ns)
            numbered = [replace(m.call, turn=i) for i, m in enumerate(models, start=1)]
            agents = sorted(self._agents.get(run_id, []))
            facts = [(m.span_id, m.end_ns, m.requested) for m in models]
            tools = self._tools.get(run_id, [])
            tools = tools + self._tree.calls(run_id, numbered=any(c.seq >= 1 for c in tools))
            calls, ends = enclosed_turns(tools, facts)
            calls = resolve_targets(order_calls(_placeable(calls), ends), agents)
            out.append((run_id, calls, numbered, self._facts.get(run_id)))
        return out


def _placeable(calls: list[RawCall]) -> list[RawCall]:
    """In a run the processor numbered, a handoff it left unnumbered (its target unknown when it
    ended: OpenLLMetry) has no place in the numbering: left out, as the receiver does."""
    if not any(c.seq >= 1 for c in calls):
        return calls
    return [c for c in calls if c.seq >= 1 or not unresolved(c)]


def run_id_of(attrs: dict[str, Any], trace_id: bytes, run_id_attribute: Optional[str]) -> str:
    """The processor's `loopguard.run.id`, else the configured attribute, else the trace id."""
    run_id = attrs.get(conv.RUN_ID) or (attrs.get(run_id_attribute) if run_id_attribute else None)
    return str(run_id) if run_id else trace_id.hex()


def span_call(span: Span, attrs: dict[str, Any], tool: ToolSpan) -> RawCall:
    """A tool span as a RawCall; seq 0 means the span carried no `loopguard.seq`."""
    return raw_call(hex_id(span.trace_id), span.span_id.hex(), hex_id(span.parent_span_id),
                    span.start_time_unix_nano, span.end_time_unix_nano, attrs, tool)


@lru_cache(maxsize=4096)
def hex_id(trace_or_span_id: bytes) -> str:
    """A trace or parent id as interned hex: the calls of a run share their trace id and
    mostly their parent, so each is formatted (and kept) once."""
    return sys.intern(trace_or_span_id.hex())


def forget_cached() -> None:
    """Empty the cache of hex ids (see otlp/wire.py's forget_cached)."""
    hex_id.cache_clear()


def raw_call(trace_hex: str, span_hex: str, parent_hex: str, start: int, end: int,
             attrs: dict[str, Any], tool: ToolSpan) -> RawCall:
    """span_call from the span's ids as hex (interned: every call of a run shares its trace
    and usually its parent) and times, as the receiver has them at hand."""
    seq = attrs.get(conv.SEQ)
    turn = attrs.get(conv.TURN)
    dispatched = attrs.get(conv.DISPATCHED)
    guard = attrs.get(conv.GUARD)
    args_digest = attrs.get(conv.ARGS_DIGEST)
    result_digest = attrs.get(conv.RESULT_DIGEST)
    exact = attrs.get(conv.RESULT_EXACT_DIGEST)
    key_id = attrs.get(conv.KEY_ID)
    # Dense numbering is a promise the processor makes: its mark, or (spans tagged before the
    # mark existed) its key id, which only the processor writes beside loopguard.seq.
    dense = attrs.get(conv.SEQ_DENSE) is True or (key_id.__class__ is str and key_id != "")
    # Type tests inline: this runs once per tool span of every request.
    return RawCall(
        seq=seq if seq.__class__ is int and seq >= 1 else 0,  # a bool is no sequence number
        tool=sys.intern(tool.tool),
        arguments=tool.arguments,
        result=tool.result,
        ok=not tool.error,
        finished=end != 0 and end >= start,
        turn=turn if turn.__class__ is int and turn >= 1 else None,
        call_id=tool.call_id,
        span_id=span_hex or None,
        start_ns=start or None,
        end_ns=end or None,
        args_digest=args_digest if args_digest.__class__ is str and args_digest else None,
        result_digest=result_digest if result_digest.__class__ is str and result_digest else None,
        dispatched=dispatched if dispatched.__class__ is bool else True,
        guard=guard if guard.__class__ is str and guard else None,
        key_id=key_id if key_id.__class__ is str and key_id else LOCAL_KEY,
        trace_id=trace_hex or None,
        parent_id=parent_hex or None,
        seq_dense=dense,
        result_exact_digest=exact if exact.__class__ is str and exact and result_digest else None,
        # Sketches compare only under the key that made them, as digests do: a tagged span's.
        equivalence=from_attributes(attrs) if key_id.__class__ is str and key_id else None,
    )


def _str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) and v else None
