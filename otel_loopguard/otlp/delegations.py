"""Delegations to managed agents, read from the span tree of a run (conventions/delegations.py).

The audit and calibrate see whole traces: each OpenInference span's parent and kind is kept,
and each agent span named `<agent>.<method>` as a candidate call of that agent; once the run is
read, a candidate whose nearest agent ancestor lists the agent as one it manages is a call
(`DelegationLinks`, shared with the receiver's run buffer, which keeps it bounded). A run the
processor numbered gets none here: the processor tags its delegations as calls itself
(processor/delegations.py).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ..calls import RawCall
from ..conventions.delegations import DelegationLinks, candidate, declared_agents, kind_of


class DelegationTree:
    """Per run: its DelegationLinks (span id -> (parent id, kind), the managers' lists, the
    candidate calls), unbounded: the audit holds the whole file already."""

    def __init__(self) -> None:
        self._runs: dict[str, DelegationLinks[RawCall]] = {}

    def note(self, run_id: str, span: Span, attrs: dict[str, Any], call: Any) -> None:
        """`call`: span_call(span, attrs, tool) of spans.py, for a candidate (it reads the ids)."""
        kind = kind_of(attrs)
        if kind is None:
            return
        declared: frozenset[str] = frozenset()
        found = None
        if kind == "agent":
            declared = declared_agents(attrs)
            tool = candidate(span.name, attrs, span.status.code == Status.STATUS_CODE_ERROR)
            found = (tool.tool, call(span, attrs, tool)) if tool is not None else None
        links = self._runs.setdefault(run_id, DelegationLinks())
        links.note(span.span_id.hex(), span.parent_span_id.hex(), kind, declared, found)

    def calls(self, run_id: str, numbered: bool) -> list[RawCall]:
        """The run's delegations: candidates whose manager lists their agent."""
        links = self._runs.get(run_id)
        return [] if numbered or links is None else links.calls()
