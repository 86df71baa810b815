"""Model spans still open while tool calls end: the turn a call belongs to before its model span ends.

The processor numbers a call's turn when the call ends, from the model spans that ended before it
started. Some frameworks end the model span only after the calls it asked for (Google ADK's built-in
spans: `generate_content <model>` ends once its calls have run, a sibling of them). Its attributes
are set at its end, so at start only its name tells it: the GenAI conventions name an inference span
`{gen_ai.operation.name} {gen_ai.request.model}`. A call that starts inside such a span of its trace,
the span still open when the call ends and not the call's parent, belongs to that model span's turn:
the one its end will count. A model span that is its calls' parent spans many requests and bounds
no turn (otlp/order.py's rule), so it is left out.

Shared by the application's threads (a span's start, a plain span's end) and the worker (a tool or
model span's end, in end order), so guarded by a lock; a name test on the application's thread, the
rest only for spans with an inference name (INFERENCE_NAME_PREFIXES, tested at each span's start).
"""

from __future__ import annotations

import threading
from itertools import islice
from typing import Any


# The GenAI semantic conventions' inference operations, as they open a span's name.
INFERENCE_NAME_PREFIXES = ("chat ", "generate_content ", "text_completion ")
MAX_OPEN_PER_TRACE = 64  # open inference spans remembered per trace (oldest forgotten first)


class OpenModels:
    """Inference spans started and not yet ended, per trace: span id -> start time."""

    def __init__(self, max_traces: int):
        self._traces: dict[int, dict[int, int]] = {}  # trace id -> span id -> start, oldest trace first
        self._max_traces = max(1, max_traces)
        self._lock = threading.Lock()
        self.count = 0  # spans noted and not yet closed: 0 spares every later lookup

    def started(self, span: Any) -> None:
        ctx = span.context
        with self._lock:
            opened = self._traces.get(ctx.trace_id)
            if opened is None:
                if len(self._traces) >= self._max_traces:
                    self._forget_oldest()
                opened = self._traces[ctx.trace_id] = {}
            if len(opened) >= MAX_OPEN_PER_TRACE:
                del opened[next(iter(opened))]
                self.count -= 1
            opened[ctx.span_id] = span.start_time or 0
            self.count += 1

    def _forget_oldest(self) -> None:
        """Drop the oldest eighth of the traces at once (a rebuilt dict: see bounded.py), so
        the cost is amortised over the inserts before the next drop."""
        kept = dict(islice(self._traces.items(), max(1, self._max_traces // 8), None))
        self._traces = kept
        self.count = sum(len(opened) for opened in kept.values())

    def ended(self, span: Any) -> None:
        """The span has ended (the worker's turn for tool and model spans, else at once)."""
        ctx = span.context
        with self._lock:
            opened = self._traces.get(ctx.trace_id)
            if opened is not None and opened.pop(ctx.span_id, None) is not None:
                self.count -= 1
                if not opened:
                    self._traces.pop(ctx.trace_id)

    def encloses(self, span: Any) -> bool:
        """Did an inference span of the call's trace, not its parent, start no later than the
        call and stay open until it ended? (Spans that ended before it are closed already.)"""
        ctx, parent, start = span.context, span.parent, span.start_time or 0
        own_parent = parent.span_id if parent is not None else None
        with self._lock:
            opened = self._traces.get(ctx.trace_id)
            if not opened:
                return False
            return any(began <= start and span_id != own_parent for span_id, began in opened.items())

    def at_fork_reinit(self) -> None:
        self._lock = threading.Lock()
