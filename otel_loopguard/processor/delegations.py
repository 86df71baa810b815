"""A smolagents managed agent's run as a call of that agent, in-process (conventions/delegations.py).

A manager agent calls an agent it manages directly, not through a tool: only the managed agent's
own AGENT span records it, under the manager's agent span, which lists it among the agents it
manages from its start (`smolagents.managed_agents.<n>.name`). The audit reads that from the span
tree (otlp/delegations.py). Here the tree is kept as spans start, and only in a trace where an
agent span listing managed agents has started: each OpenInference span's parent and kind. When an
agent span `<agent>.<method>` ends, its nearest agent ancestor with no tool span between (a tool
span would be the call already counted) tells whether it is a delegation.

Fed on the application's thread (span starts) and read by the worker (span ends), so guarded by
a lock; memory bounded per trace and in traces.
"""

from __future__ import annotations

import threading
from itertools import islice
from typing import Any, Mapping, Optional

from ..conventions import ToolSpan
from ..conventions.delegations import declared_agents, delegated_agent, kind_of, manager_of
from ..conventions.payloads import unwrap_arguments, unwrap_result
from ..conventions.spec import SMOLAGENTS_MANAGED as MANAGED

MAX_LINKS_PER_TRACE = 4096  # spans of one trace whose parent and kind are kept (oldest forgotten)
MAX_OPEN_CALLS = 4096  # delegations started and not yet ended (oldest forgotten)


class _Tree:
    def __init__(self) -> None:
        self.links: dict[str, tuple[str, str]] = {}  # span id -> (parent id, kind), hex
        self.managers: dict[str, frozenset[str]] = {}  # agent span id -> the agents it manages


class ManagedAgents:
    """Per trace with a manager: the span tree's links and the managers' lists."""

    def __init__(self, max_traces: int):
        self._trees: dict[int, _Tree] = {}  # oldest trace first
        # (trace id, span id) -> the managed agent, for delegations told at start: the end
        # follows the start's word (a number was taken then: dropping it would leave a gap)
        self._calls: dict[tuple[int, str], str] = {}
        self._max_traces = max(1, max_traces)
        self._lock = threading.Lock()
        self.active = False  # a manager has been seen: spans' links are worth keeping

    def started(self, span: Any, attributes: Mapping[str, Any]) -> bool:
        """At an OpenInference span's start (application thread): True when it is a managed
        agent's span under its manager (a call, numbered now, in dispatch order)."""
        kind = kind_of(attributes)
        if kind is None:
            return False
        declared = declared_agents(attributes) if kind == "agent" else frozenset()
        if not declared and not self.active:
            return False
        ctx, parent = span.context, span.parent
        span_hex = format(ctx.span_id, "016x")
        with self._lock:
            tree = self._trees.get(ctx.trace_id)
            if tree is None:
                if not declared:
                    return False  # no manager in this trace
                tree = self._new_tree(ctx.trace_id)
            if len(tree.links) >= MAX_LINKS_PER_TRACE:
                tree.links = dict(islice(tree.links.items(), MAX_LINKS_PER_TRACE // 8, None))
            tree.links[span_hex] = (format(parent.span_id, "016x") if parent is not None else "", kind)
            if declared:
                tree.managers[span_hex] = declared
            agent = self._managed(tree, span_hex, span.name) if kind == "agent" else None
            if agent is not None:
                if len(self._calls) >= MAX_OPEN_CALLS:
                    self._calls = dict(islice(self._calls.items(), MAX_OPEN_CALLS // 8, None))
                self._calls[(ctx.trace_id, span_hex)] = agent
            return agent is not None

    @staticmethod
    def _managed(tree: _Tree, span_hex: str, name: str) -> Optional[str]:
        """The managed agent an agent span runs, when its nearest agent ancestor lists it."""
        manager = manager_of(span_hex, tree.links)
        return delegated_agent(name, tree.managers.get(manager or "", frozenset()))

    def _new_tree(self, trace_id: int) -> _Tree:
        if len(self._trees) >= self._max_traces:
            self._trees = dict(islice(self._trees.items(), max(1, self._max_traces // 8), None))
        tree = self._trees[trace_id] = _Tree()
        self.active = True
        return tree

    def delegation(self, span: Any, attributes: Mapping[str, Any], error: bool) -> Optional[ToolSpan]:
        """At an agent span's end (worker): the call of the managed agent it runs, if it is one."""
        if not self.active or kind_of(attributes) != "agent":
            return None
        ctx = span.context
        span_hex = format(ctx.span_id, "016x")
        with self._lock:
            agent = self._calls.pop((ctx.trace_id, span_hex), None)
            tree = self._trees.get(ctx.trace_id)
            if tree is not None and tree.managers.pop(span_hex, None) is not None and not tree.managers:
                del self._trees[ctx.trace_id]  # the trace's last manager has ended: its tree goes
        if agent is None:
            return None
        result, result_error = unwrap_result(_first(attributes, MANAGED.result))
        return ToolSpan(convention="openinference", tool=agent, call_id=None, result=result,
                        arguments=unwrap_arguments(_first(attributes, MANAGED.arguments)),
                        error=error or result_error)

    def at_fork_reinit(self) -> None:
        self._lock = threading.Lock()


def _first(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return next((attributes[k] for k in keys if k in attributes), None)
