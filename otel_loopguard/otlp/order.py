"""Order tool calls that carry no `loopguard.seq` (apps without the processor).

The sequence follows span start time, then end time, then span id; never
arrival order. A call's turn is the number of the run's model spans that
ended before it started. Re-deliveries of one span get one number.

A model span that is the parent of calls is not one request before them: it spans them all
(Google ADK + OpenInference: one LLM span per agent run). Its end is no turn boundary; the
calls it encloses take their turns from its record of the conversation, where it has one
(conventions/conversation.py), else each is a decision of its own (`enclosed_turns`).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, TypeVar, Union

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


# A model span as `enclosed_turns` reads it: (span id, end time, call id -> position of the
# message that asked for it in the conversation the span records).
ModelSpanFacts = tuple[str, int, Mapping[str, int]]


def enclosed_turns(calls: list[C], models: Sequence[ModelSpanFacts]) -> tuple[list[C], list[int]]:
    """(the calls, the model end times that bound turns). The calls a model span encloses (it is
    their parent) that carry no turn take one from its record: the calls one message asked for
    share a turn; a call it does not record has a turn of its own. All are numbered after every
    turn the other model spans can give, so none is taken for another's sibling."""
    parents = {c.parent_id for c in calls if c.turn is None and c.parent_id}
    if not any(span_id in parents for span_id, _, _ in models):
        return calls, [end for _, end, _ in models]
    ends = [end for span_id, end, _ in models if span_id not in parents]
    base, turns = len(ends) + 1, {}
    for span_id, _, requested in models:
        if span_id in parents:
            turns[span_id] = (base, requested)
            base += max(requested.values(), default=0) + 1
    out = []
    for c in calls:
        enclosing = turns.get(c.parent_id or "") if c.turn is None else None
        if enclosing is None:
            out.append(c)
            continue
        first, requested = enclosing
        position = requested.get(c.call_id) if c.call_id else None
        if position is None:  # not in the record: a turn of its own
            turn, base = base, base + 1
        else:
            turn = first + position
        out.append(c.renumbered(c.seq, turn))
    return out, ends


def _span_key(call: Union[RawCall, ToolCall]) -> object:
    return (call.trace_id, call.span_id) if call.span_id else id(call)


def _turn_of(call: Union[RawCall, ToolCall], model_ends: list[int]) -> Optional[int]:
    if not model_ends:
        return None
    start = call.start_ns or 0
    return sum(1 for end in model_ends if end <= start)
