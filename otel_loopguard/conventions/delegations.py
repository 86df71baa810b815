"""A manager agent delegating to an agent it manages, told by the span tree (pure).

smolagents calls a managed agent directly, not through a tool: no tool span records the
delegation, only the managed agent's own AGENT span under the manager's, which lists it
(spec.SMOLAGENTS_MANAGED; research/conventions/FINDINGS.md, 8.11). An agent span under another
agent span is no delegation by itself: handoffs (OpenAI Agents) and wrappers (OpenLLMetry
LangChain's `<agent>.workflow`) nest so too; only the manager's list makes it one.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .spec import SMOLAGENTS_MANAGED as MANAGED

MAX_DEPTH = 64  # ancestors walked up from an agent span to its manager's (steps, chains)


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
