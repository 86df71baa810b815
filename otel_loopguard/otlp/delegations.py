"""Delegations to managed agents, read from the span tree of a run (conventions/delegations.py).

The audit and calibrate see whole traces: each OpenInference span's parent and kind is kept,
and each agent span named `<agent>.<method>` as a candidate call of that agent; once the run is
read, a candidate whose nearest agent ancestor lists the agent as one it manages is a call.
A run the processor numbered gets none here: the processor tags its delegations as calls itself
(processor/delegations.py). The receiver, which keeps no span tree, cannot tell them.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ..calls import RawCall
from ..conventions import ToolSpan
from ..conventions.delegations import declared_agents, kind_of, manager_of
from ..conventions.payloads import unwrap_arguments, unwrap_result
from ..conventions.spec import SMOLAGENTS_MANAGED as MANAGED


class DelegationTree:
    """Per run: span id -> (parent id, kind), the managers' lists, the candidate calls."""

    def __init__(self) -> None:
        self._links: dict[str, dict[str, tuple[str, str]]] = {}
        self._managers: dict[str, dict[str, frozenset[str]]] = {}
        self._candidates: dict[str, list[RawCall]] = {}

    def note(self, run_id: str, span: Span, attrs: dict[str, Any], call: Any) -> None:
        """`call`: span_call(span, attrs, tool) of spans.py, for a candidate (it reads the ids)."""
        kind = kind_of(attrs)
        if kind is None:
            return
        span_id = span.span_id.hex()
        self._links.setdefault(run_id, {})[span_id] = (span.parent_span_id.hex(), kind)
        if kind != "agent":
            return
        declared = declared_agents(attrs)
        if declared:
            self._managers.setdefault(run_id, {})[span_id] = declared
        agent = span.name.rpartition(".")[0]
        if agent:
            result, result_error = unwrap_result(_first(attrs, MANAGED.result))
            tool = ToolSpan(convention="openinference", tool=agent, call_id=None, result=result,
                            arguments=unwrap_arguments(_first(attrs, MANAGED.arguments)),
                            error=span.status.code == Status.STATUS_CODE_ERROR or result_error)
            self._candidates.setdefault(run_id, []).append(call(span, attrs, tool))

    def calls(self, run_id: str, numbered: bool) -> list[RawCall]:
        """The run's delegations: candidates whose manager lists their agent."""
        managers = self._managers.get(run_id)
        if not managers or numbered:
            return []
        links = self._links.get(run_id, {})
        out = []
        for c in self._candidates.get(run_id, []):
            manager = manager_of(c.span_id or "", links)
            if manager is not None and c.tool in managers.get(manager, frozenset()):
                out.append(c)
        return out


def _first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((attrs[k] for k in keys if k in attrs), None)
