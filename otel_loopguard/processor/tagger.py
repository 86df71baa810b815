"""Tag finished tool spans: digests, sequence, turn, outcome, key id, mode; judge the run.

Shared by the span processor (on its worker thread) and the exporter wrapper
(on the export thread). It sees spans in the order they end: for an agent
loop that is dispatch order (a decision's calls end before the next decision
is made); parallel siblings of one decision are numbered in the order they end.
"""

from __future__ import annotations

import bisect
import logging
import threading
from types import MappingProxyType
from typing import Any, Optional

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import StatusCode
from opentelemetry.util.types import Attributes

from ..bounded import BoundedMap
from ..calls import RawCall, ToolCall
from ..conventions import ModelSpan, ToolSpan, recognise
from ..conventions import attributes as conv
from ..conventions.spec import MODEL_CONVENTIONS, TOOL_CONVENTIONS
from ..detect import Run
from ..findings import STOP, WARN, Finding
from ..fingerprint import Fingerprinter, fingerprint_call
from .config import ProcessorConfig

_log = logging.getLogger("otel_loopguard.processor")

MARKERS = tuple(dict.fromkeys([c.marker for c in TOOL_CONVENTIONS] + [c.marker for c in MODEL_CONVENTIONS] + [conv.TOOL_NAME]))
# Every attribute that can hold a raw tool payload, under any convention.
RAW_PAYLOAD_KEYS = frozenset(k for c in TOOL_CONVENTIONS for k in (*c.arguments, *c.result)) | {"output.value", "input.value"}
DECISION_EVENT = "loopguard.decision"
MAX_MODEL_ENDS = 4096


def interesting(span: ReadableSpan) -> bool:
    """Cheap, for the application thread: could this be a tool or model span?"""
    attrs = span.attributes
    if not attrs:
        return False
    # BoundedAttributes answers `in` through the Mapping ABC (a __getitem__ and a
    # caught KeyError per key); its plain dict answers in tens of nanoseconds.
    plain = getattr(attrs, "_dict", attrs)
    return any(k in plain for k in MARKERS)


class _RunState:
    __slots__ = ("run", "seq", "model_ends")

    def __init__(self, run: Run):
        self.run = run
        self.seq = 0
        self.model_ends: list[int] = []  # end times of the run's model spans, sorted

    def turn_at(self, start: int) -> Optional[int]:
        """The number of model decisions that ended before this call started."""
        return bisect.bisect_right(self.model_ends, start) if self.model_ends else None


class Tagger:
    def __init__(self, fp: Fingerprinter, config: ProcessorConfig):
        self._fp = fp
        self._config = config
        self._runs = BoundedMap[str, _RunState](config.max_runs)
        self._lock = threading.Lock()

    @property
    def key_id(self) -> str:
        return self._fp.key_id

    def tag(self, span: ReadableSpan) -> ReadableSpan:
        """The span to export: a tagged copy for tool spans, the span itself otherwise."""
        source = span.attributes or {}
        attrs = dict(getattr(source, "_dict", source))  # the plain dict copies much faster
        found = recognise(attrs, span.status.status_code == StatusCode.ERROR)
        if isinstance(found, ModelSpan):
            self._note_model(span, attrs)
            return span
        if not isinstance(found, ToolSpan) or conv.ARGS_DIGEST in attrs:
            return span  # not a tool span, or tagged already (a second install)
        run_id = self._run_id(span, attrs)
        with self._lock:
            state = self._state(run_id)
            state.seq += 1
            call = fingerprint_call(self._raw(span, found, state), self._fp)
            findings = state.run.observe(call)
        return self._copy(span, attrs, self._tags(call, found, run_id), findings)

    def _run_id(self, span: ReadableSpan, attrs: dict[str, Any]) -> str:
        name = self._config.run_id_attribute
        value = attrs.get(name) if name else None
        return str(value) if value else format(span.context.trace_id, "032x")

    def _state(self, run_id: str) -> _RunState:
        state = self._runs.get(run_id)
        if state is None:
            state = _RunState(Run(run_id, self._fp.policy))
            self._runs.put(run_id, state)
        return state

    def _note_model(self, span: ReadableSpan, attrs: dict[str, Any]) -> None:
        with self._lock:
            state = self._state(self._run_id(span, attrs))
            if len(state.model_ends) < MAX_MODEL_ENDS:
                bisect.insort(state.model_ends, span.end_time or 0)

    def _raw(self, span: ReadableSpan, found: ToolSpan, state: _RunState) -> RawCall:
        ctx = span.context
        parent = span.parent
        return RawCall(
            seq=state.seq,
            tool=found.tool,
            arguments=found.arguments,
            result=found.result,
            ok=not found.error,
            turn=state.turn_at(span.start_time or 0),
            call_id=found.call_id,
            span_id=format(ctx.span_id, "016x"),
            trace_id=format(ctx.trace_id, "032x"),
            parent_id=format(parent.span_id, "016x") if parent else None,
            start_ns=span.start_time,
            end_ns=span.end_time,
        )

    def _copy(self, span: ReadableSpan, attrs: dict[str, Any], tags: dict[str, Any], findings: list[Finding]) -> ReadableSpan:
        if self._config.redact:
            for key in RAW_PAYLOAD_KEYS:
                attrs.pop(key, None)
        attrs.update(tags)
        return ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=_bounded(attrs, span.dropped_attributes),
            events=_events(span, findings),
            links=span._links,  # noqa: SLF001 - passed on as is, dropped count included
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )

    def _tags(self, call: ToolCall, found: ToolSpan, run_id: str) -> dict[str, Any]:
        tags: dict[str, Any] = {
            conv.TOOL_NAME: call.tool,
            conv.ARGS_DIGEST: call.action,
            conv.SEQ: call.seq,
            conv.RUN_ID: run_id,
            conv.OUTCOME: "error" if found.error else "ok",
            conv.KEY_ID: self._fp.key_id,
            conv.MODE: self._config.mode,
        }
        if call.result is not None:
            tags[conv.RESULT_DIGEST] = call.result
        if call.turn is not None:
            tags[conv.TURN] = call.turn
        return tags


def _bounded(attrs: dict[str, Any], dropped: int) -> Attributes:
    if not dropped:
        # The values were validated when the application set them, and ours are plain
        # str/int: a read-only view spares re-validating every attribute.
        return MappingProxyType(attrs)
    from opentelemetry.attributes import BoundedAttributes

    bounded = BoundedAttributes(maxlen=None, attributes=attrs, immutable=True)
    bounded.dropped = dropped  # what the SDK dropped from the original still counts
    return bounded


def _events(span: ReadableSpan, findings: list[Finding]) -> Any:
    decisions = [f for f in findings if f.severity in (STOP, WARN)]
    if not decisions:
        return span._events  # noqa: SLF001 - unchanged, dropped count included
    events = BoundedList(None)
    events.extend(span.events)
    events.dropped = span.dropped_events
    for f in decisions:
        events.append(Event(DECISION_EVENT, _decision(f), span.end_time))
    return events


def _decision(f: Finding) -> dict[str, Any]:
    """What enforce mode would have done at this call: block on stop, nudge on warn."""
    return {
        "loopguard.decision": "would_block" if f.severity == STOP else "would_warn",
        "loopguard.finding.kind": f.kind,
        "loopguard.finding.severity": f.severity,
        "loopguard.finding.reason": f.reason,
        "loopguard.policy.version": f.policy_version,
    }
