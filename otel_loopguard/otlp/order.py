"""Order tool calls that carry no `loopguard.seq` (apps without the processor).

The sequence follows span start time, then end time, then span id; never
arrival order. A call's turn is the number of the run's model spans that
ended before it started. Re-deliveries of one span get one number.
"""

from __future__ import annotations

from typing import Optional, TypeVar, Union

from ..calls import RawCall, ToolCall

C = TypeVar("C", RawCall, ToolCall, Union[RawCall, ToolCall])  # the receiver holds both (handoffs)


def order_calls(calls: list[C], model_ends: list[int]) -> list[C]:
    """Calls in sequence order, numbering those without `loopguard.seq` and deriving turns."""
    if calls and all(c.seq >= 1 for c in calls):
        return sorted(calls, key=lambda c: c.seq)  # the processor numbered them at dispatch
    # Re-deliveries of one span must get one number, so number spans, not records: by trace and
    # span id, since span ids need only be unique within their trace (a run keyed by a
    # conversation spans traces).
    order: dict[object, int] = {}
    for c in sorted(calls, key=lambda c: (c.start_ns or 0, c.end_ns or 0, c.span_id or "", c.trace_id or "")):
        order.setdefault(_span_key(c), len(order) + 1)
    out = []
    for c in calls:
        seq = order[_span_key(c)]
        turn = c.turn if c.turn is not None else _turn_of(c, model_ends)
        out.append(c.renumbered(seq, turn))
    return sorted(out, key=lambda c: c.seq)


def _span_key(call: Union[RawCall, ToolCall]) -> object:
    return (call.trace_id, call.span_id) if call.span_id else id(call)


def _turn_of(call: Union[RawCall, ToolCall], model_ends: list[int]) -> Optional[int]:
    if not model_ends:
        return None
    start = call.start_ns or 0
    return sum(1 for end in model_ends if end <= start)
