"""Handoffs between agents as actions (pure).

A handoff is judged like a tool call: its action is (handoff, from agent, to agent), so
repeats, cycles, no-progress and the budgets see agents handing the run back and forth.
Its tool name names both agents, so every finding and reason does:
`handoff(TriageAgent -> BillingAgent)`.

Where the instrumentation never records the target (OpenLLMetry), the call is held until
the run is ordered and takes the target from the agent that acts next: the agent span that
starts first after the handoff, else (agent spans filtered out) the source of the next
handoff. Only a handoff with neither after it keeps `?`.
"""

from __future__ import annotations

import bisect
from typing import Any, Optional, Sequence

from ..calls import RawCall

PREFIX = "handoff("
UNKNOWN_AGENT = "?"
FROM, TO = "from_agent", "to_agent"


def handoff_name(source: Optional[str], target: Optional[str]) -> str:
    return f"{PREFIX}{source or UNKNOWN_AGENT} -> {target or UNKNOWN_AGENT})"


def handoff_arguments(source: Optional[str], target: Optional[str]) -> dict[str, Optional[str]]:
    return {FROM: source, TO: target}


def is_handoff(tool: str) -> bool:
    return tool.startswith(PREFIX)


def target_unknown(found: Any) -> bool:
    """A recognised handoff (ToolSpan or RawCall) whose span does not name its target."""
    args = found.arguments
    return found.tool.startswith(PREFIX) and isinstance(args, dict) and args.get(TO) is None


def unresolved(call: RawCall) -> bool:
    """A handoff whose target is still to be taken from the agent that follows."""
    return call.args_digest is None and target_unknown(call)


def node_of_namespace(namespace: Any) -> Optional[str]:
    """The node a tool's agent runs as in its parent graph, from LangGraph's checkpoint
    namespace (`outer:<task>|supervisor:<task>|tools:<task>` -> `supervisor`): the node
    before the tool node. None for a tool node of the top graph (no agent around it)."""
    if not isinstance(namespace, str):
        return None
    parts = namespace.split("|")
    node = parts[-2].split(":", 1)[0] if len(parts) >= 2 else ""
    return node or None


def resolve_targets(calls: list[Any], agents: Sequence[tuple[int, str]] = ()) -> list[Any]:
    """Calls in sequence order, each unresolved handoff given the agent that acts next as its
    target: the agent of the first agent span (`agents`: (start time, agent) of the run's
    agent spans, sorted) that starts after the handoff started, else the source of the next
    handoff (the agent the run was handed to is the one that hands it on). Other calls, and
    records that are not RawCalls, pass through unchanged."""
    out = list(calls)
    starts = [start for start, _ in agents]
    following: Optional[str] = None
    for i in range(len(out) - 1, -1, -1):
        call = out[i]
        if not isinstance(call, RawCall) or not is_handoff(call.tool) or not isinstance(call.arguments, dict):
            continue
        source = call.arguments.get(FROM)
        if unresolved(call):
            target = _next_agent(call, agents, starts) or following
            if target:
                out[i] = _with_target(call, target)
        following = source if isinstance(source, str) else following
    return out


def _next_agent(call: RawCall, agents: Sequence[tuple[int, str]], starts: list[int]) -> Optional[str]:
    """The agent whose span starts first after the handoff's start. The handoff's own agent
    span started before it (the handoff is its child), so it is never taken for the target."""
    if not call.start_ns:
        return None
    i = bisect.bisect_right(starts, call.start_ns)
    return agents[i][1] if i < len(agents) else None


def _with_target(call: RawCall, target: str) -> RawCall:
    source = call.arguments.get(FROM)
    return RawCall(
        seq=call.seq, tool=handoff_name(source, target), arguments=handoff_arguments(source, target),
        result={TO: target} if call.result is None else call.result, ok=call.ok,
        finished=call.finished, turn=call.turn, call_id=call.call_id, span_id=call.span_id,
        start_ns=call.start_ns, end_ns=call.end_ns, identity=call.identity, args_digest=call.args_digest,
        result_digest=call.result_digest, dispatched=call.dispatched, guard=call.guard, key_id=call.key_id,
        trace_id=call.trace_id, parent_id=call.parent_id, seq_dense=call.seq_dense,
        result_exact_digest=call.result_exact_digest,
    )
