"""A manager agent delegating to an agent it manages, told by the span tree (pure).

smolagents calls a managed agent directly, not through a tool: no tool span records the
delegation, only the managed agent's own AGENT span under the manager's, which lists it
(spec.SMOLAGENTS_MANAGED; research/conventions/FINDINGS.md, 8.11). An agent span under another
agent span is no delegation by itself: handoffs (OpenAI Agents) and wrappers (OpenLLMetry
LangChain's `<agent>.workflow`) nest so too; only the manager's list makes it one.

`DelegationLinks` holds one run's tree as the readers that see spans one by one keep it (the
audit per run of its files, otlp/delegations.py; the receiver per open run, receiver/runs/buffer.py).
"""

from __future__ import annotations

from typing import Any, Generic, Mapping, Optional, TypeVar

from .payloads import unwrap_arguments, unwrap_result
from .recognise import ToolSpan
from .spec import SMOLAGENTS_MANAGED as MANAGED

C = TypeVar("C")  # a candidate call as its reader holds it (a RawCall with the span's ids)

MAX_DEPTH = 64  # ancestors walked up from an agent span to its manager's (steps, chains)
# OpenInference's span kinds: a reader that picks spans by marker value (the receiver's decode)
# keeps the tree links of these. A kind not listed has no link there: a walk up stops at it and
# the delegation is not counted.
SPAN_KINDS = frozenset(k for kind in ("CHAIN", "LLM", "TOOL", "RETRIEVER", "EMBEDDING", "AGENT", "RERANKER", "GUARDRAIL",
                                      "EVALUATOR", "PROMPT", "UNKNOWN") for k in (kind, kind.lower()))


def kind_of(attributes: Mapping[str, Any]) -> Optional[str]:
    """"agent", "tool", "other" for a span the managed-agent convention marks, else None."""
    marker = attributes.get(MANAGED.marker)
    if type(marker) is not str:
        return None
    return "agent" if marker in MANAGED.marker_values else "tool" if marker in MANAGED.tool_marker_values else "other"


def declared_agents(attributes: Mapping[str, Any]) -> frozenset[str]:
    """The agents an agent span says it manages."""
    prefix, suffix = MANAGED.declared_prefix, MANAGED.declared_suffix
    return frozenset(v for k, v in attributes.items()
                     if k.startswith(prefix) and k.endswith(suffix) and type(v) is str and v)


def delegated_agent(span_name: str, declared: frozenset[str]) -> Optional[str]:
    """The managed agent an agent span `<agent>.<method>` runs, if its manager lists it."""
    agent = span_name.rpartition(".")[0]
    return agent if agent in declared else None


def manager_of(span_id: str, links: Mapping[str, tuple[str, str]]) -> Optional[str]:
    """The nearest agent span above `span_id` (links: span id -> (parent id, kind)), or None
    when a tool span comes first (the agent runs inside a call already counted) or none is found."""
    parent = links.get(span_id, ("", ""))[0]
    for _ in range(MAX_DEPTH):
        link = links.get(parent)
        if link is None or link[1] == "tool":
            return None
        if link[1] == "agent":
            return parent
        parent = link[0]
    return None


def candidate(span_name: str, attributes: Mapping[str, Any], error: bool) -> Optional[ToolSpan]:
    """An agent span `<agent>.<method>` as the call of that agent it is if its manager lists it."""
    agent = span_name.rpartition(".")[0]
    if not agent:
        return None
    result, result_error = unwrap_result(_first(attributes, MANAGED.result))
    return ToolSpan(convention="openinference", tool=agent, call_id=None, result=result,
                    arguments=unwrap_arguments(_first(attributes, MANAGED.arguments)), error=error or result_error)


def _first(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return next((attributes[k] for k in keys if k in attributes), None)


class DelegationLinks(Generic[C]):
    """One run's span tree: span id -> (parent id, kind), the managers' lists, the candidate
    calls, each kept up to its bound (None: unbounded). Past a bound a span is not kept: a
    delegation whose link, manager or candidate is missing is not counted, never made up."""

    __slots__ = ("links", "managers", "candidates", "_bounds")

    def __init__(self, max_links: Optional[int] = None, max_candidates: Optional[int] = None) -> None:
        self.links: dict[str, tuple[str, str]] = {}
        self.managers: dict[str, frozenset[str]] = {}
        self.candidates: list[tuple[str, str, C]] = []  # (span id, agent, call)
        self._bounds = (max_links, max_candidates)

    def note(self, span_id: str, parent_id: str, kind: str, declared: frozenset[str] = frozenset(),
             call: Optional[tuple[str, C]] = None) -> None:
        """A span of the kind_of() `kind`; an agent span's `declared` agents and its `call`
        (agent, call) as a candidate."""
        max_links, max_candidates = self._bounds
        if max_links is None or len(self.links) < max_links or span_id in self.links:
            self.links[span_id] = (parent_id, kind)
        if declared and (max_links is None or len(self.managers) < max_links):
            self.managers[span_id] = declared
        if call is not None and (max_candidates is None or len(self.candidates) < max_candidates):
            self.candidates.append((span_id, call[0], call[1]))

    def calls(self) -> list[C]:
        """The candidates whose manager lists their agent, in the order noted."""
        if not self.managers:
            return []
        return [call for span_id, agent, call in self.candidates
                if agent in self.managers.get(manager_of(span_id, self.links) or "", frozenset())]
