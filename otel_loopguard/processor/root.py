"""A stopped run's root span, marked: status ERROR and a description with the tool and count first.

Backends list traces by their root span (Phoenix's traces list shows its status and the start of
its status message; Jaeger counts errors). When a trace's tool calls brought a stop verdict (the
calls enforce mode denies, `would_block` in observe mode), its root span leaves as a copy with
status ERROR, a description such as `lookup_order x5 repeat · loopguard stop` (the key words
first: a list cuts it short) and `loopguard.run.verdict`. Only a status the application left
UNSET is changed: an ERROR or an OK is the application's own word on the run.

The root of every trace whose own run (run id = the trace id) had tool calls also carries
`loopguard.run.calls`: how many calls the processor numbered in it, so a receiver can tell that
the run's last calls were lost on the way (no hole in the numbers says so). An attribute of that
name the application set is kept.

A root is a span with no parent: a span whose parent came from another process (a remote
parent) is the root of nothing a list shows, and the trace's real root is not ours to mark.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Status, StatusCode

from ..bounded import BoundedMap
from ..conventions import attributes as conv
from ..findings import STOP, Finding
from .sdk_shape import copy_span

VERDICT = "loopguard.run.verdict"
STOP_VERDICT = "stop"
RUN_CALLS = conv.RUN_CALLS


def description(finding: Finding) -> str:
    """`lookup_order x5 repeat · loopguard stop`: tool and count, then kind, then whose verdict."""
    head = f"{finding.tool} x{finding.count} {finding.kind}" if finding.tool else f"{finding.kind} x{finding.count}"
    return f"{head} · loopguard {STOP_VERDICT}"


class RootMarks:
    """Traces whose tool calls brought a stop, until their root span passes (bounded)."""

    def __init__(self, limit: int):
        self._stops: BoundedMap[int, Finding] = BoundedMap(limit)
        self._calls: BoundedMap[int, int] = BoundedMap(limit)  # trace -> calls its own run numbered
        self._lock = threading.Lock()
        # Read on the application's thread without the lock, for every span that needs no
        # tagging: an attribute read settles it while no trace waits for its root.
        self.waiting = False

    def note(self, trace_id: int, stopped: Optional[Finding], findings: list[Finding]) -> None:
        """A tool call's findings: when one is a stop, the trace's root will say the run's stop
        (the first one: every call after it is marked with it), else this one (a tool's cap)."""
        stop = next((f for f in findings if f.severity == STOP), None)
        if stop is None:
            return
        with self._lock:
            if self._stops.get(trace_id) is None:
                self._stops.put(trace_id, stopped or stop)
                self.waiting = True

    def count(self, trace_id: int, calls: int) -> None:
        """The trace's own run has numbered `calls` tool calls so far: its root will say so."""
        with self._lock:
            self._calls.put(trace_id, calls)
            self.waiting = True

    def mark(self, span: ReadableSpan) -> ReadableSpan:
        """The span itself, or, for the root of a trace with tool calls or a stop, the marked copy."""
        if span.parent is not None:
            return span
        with self._lock:
            stop = self._stops.pop(span.context.trace_id)
            calls = self._calls.pop(span.context.trace_id)
            self.waiting = len(self._stops) > 0 or len(self._calls) > 0
        if stop is not None and span.status.status_code is not StatusCode.UNSET:
            stop = None  # the application's own ERROR or OK stands
        if calls is not None and RUN_CALLS in (span.attributes or {}):
            calls = None  # the application's own attribute of that name stands
        if stop is None and calls is None:
            return span
        return marked(span, stop, calls)

    def at_fork_reinit(self) -> None:
        self._lock = threading.Lock()


def marked(span: ReadableSpan, stop: Optional[Finding], calls: Optional[int] = None) -> ReadableSpan:
    """A copy of the root: with a stop, status ERROR, the stop's description and
    `loopguard.run.verdict`; with a count, `loopguard.run.calls`."""
    attrs = dict(span.attributes or {})
    if calls is not None:
        attrs[RUN_CALLS] = calls
    if stop is None:
        return copy_span(span, _bounded(attrs, span.dropped_attributes), None)
    attrs[VERDICT] = STOP_VERDICT
    return copy_span(span, _bounded(attrs, span.dropped_attributes), None,
                     Status(StatusCode.ERROR, description(stop)))


def _bounded(attrs: dict[str, Any], dropped: int) -> Any:
    from opentelemetry.attributes import BoundedAttributes

    bounded = BoundedAttributes(maxlen=None, attributes=attrs, immutable=True)
    bounded.dropped = dropped  # what the SDK dropped from the original still counts
    return bounded
