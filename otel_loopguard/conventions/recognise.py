"""Recognise tool and model spans from their attributes (pure).

Both shells call this: the processor with an SDK span's attributes, the
receiver and the audit reader with attributes decoded from OTLP.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from .attributes import DUPLICATE_OF, OUTCOME, TOOL_NAME
from .payloads import unwrap_arguments, unwrap_result
from .mcp import contentless
from .handoffs import TO, UNKNOWN_AGENT, handoff_arguments, handoff_name, node_of_namespace
from .spec import (ADK_TRANSFER, AGENT_CONVENTIONS, IGNORED_TOOLS, LANGGRAPH_HANDOFF, MARKED_HANDOFFS, MCP_TOOL,
                   MODEL_CONVENTIONS, OPENINFERENCE_HANDOFF, TASK_TOOL_CONVENTIONS, TOOL_CONVENTIONS, HandoffConvention,
                   ModelConvention, ToolConvention)

# OpenLLMetry names the tool in gen_ai.tool.name on some frameworks, in
# traceloop.entity.name on others (research/conventions/FINDINGS.md).
TOOL_NAME_FALLBACKS = ("gen_ai.tool.name", "traceloop.entity.name", "tool.name")


@dataclass(slots=True, kw_only=True)  # not frozen: frozen ones cost more to build, once a span (docs/performance.md, "Records")
class ToolSpan:
    convention: str
    tool: str
    call_id: Optional[str]
    arguments: Any
    result: Any
    error: bool


@dataclass(slots=True, kw_only=True)  # not frozen: frozen ones cost more to build, once a span (docs/performance.md, "Records")
class ModelSpan:
    convention: str
    model: Optional[str]
    input_tokens: int
    output_tokens: int


Recognised = Union[ToolSpan, ModelSpan, None]
_HANDOFF_VALUES = frozenset(v for h in MARKED_HANDOFFS for v in h.marker_values)
if not {h.marker for h in MARKED_HANDOFFS} <= {c.marker for c in TOOL_CONVENTIONS}:
    raise ImportError("a handoff marker must be a tool convention's marker key (recognise reads them once)")
MAX_TOKENS = 2**63 - 1


def recognise(attributes: Mapping[str, Any], status_error: bool = False, name: str = "") -> Recognised:
    """A ToolSpan (a tool call or a handoff between agents), a ModelSpan, or None for every
    other span. `name` is the span's name: OpenInference tells a handoff only by it."""
    get = attributes.get
    handoff = False
    for conv in TOOL_CONVENTIONS:  # markers inline: this runs for every span on both hot paths
        marker = get(conv.marker)
        if isinstance(marker, str):  # an array value is not a marker
            if marker in conv.marker_values:
                # A second instrumentation's span of a call already counted: not a call of its own.
                if DUPLICATE_OF in attributes or conv is MCP_TOOL and contentless(attributes):
                    return None
                return _tool(conv, attributes, status_error, name)
            # Handoff markers share the tool markers' keys: one set test here, and the marker
            # is read again only for the rare handoff span (tools take precedence).
            handoff = handoff or marker in _HANDOFF_VALUES
    if handoff:
        for hconv in MARKED_HANDOFFS:
            marker = get(hconv.marker)
            if isinstance(marker, str) and marker in hconv.marker_values:
                return None if DUPLICATE_OF in attributes else _handoff(hconv, attributes, status_error)
    if TOOL_NAME in attributes:
        return None if DUPLICATE_OF in attributes else _tagged_tool(attributes, status_error)
    for conv in TASK_TOOL_CONVENTIONS:
        marker = get(conv.marker)
        if isinstance(marker, str) and marker in conv.marker_values and conv.requires in attributes:
            return None if DUPLICATE_OF in attributes else _tool(conv, attributes, status_error, name)
    for mconv in MODEL_CONVENTIONS:
        marker = get(mconv.marker)
        if isinstance(marker, str) and marker in mconv.marker_values:
            return None if DUPLICATE_OF in attributes else _model(mconv, attributes)
    return None


def agent_of(attributes: Mapping[str, Any]) -> Optional[str]:
    """The agent an agent-invocation span runs (spec.AGENT_CONVENTIONS), else None. Meant for
    spans recognise() found neither a call nor a model in: a handoff span may carry the
    same agent name (its source), and is a call first."""
    for conv in AGENT_CONVENTIONS:
        marker = attributes.get(conv.marker)
        if isinstance(marker, str) and marker in conv.marker_values:
            agent = _agent(_first(attributes, conv.agent))
            if agent is not None:
                return agent
    return None


def is_tool_span(attributes: Mapping[str, Any]) -> bool:
    """Whether the attributes mark a tool call under any convention. Markers are set when a
    span starts, so this answers for a span still open (the guard's decision span)."""
    return any(attributes.get(c.marker) in c.marker_values for c in TOOL_CONVENTIONS)


def _first(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attributes.get(key)
        if value is not None or key in attributes:
            return value
    return None


def _tool(conv: ToolConvention, attributes: Mapping[str, Any], status_error: bool, name: str = "") -> Optional[ToolSpan]:
    tool = attributes.get(TOOL_NAME) or attributes.get(conv.tool) or _first(attributes, TOOL_NAME_FALLBACKS)
    if type(tool) is str and tool in IGNORED_TOOLS:
        return None
    if tool is None and name.startswith(OPENINFERENCE_HANDOFF.span_name_prefix) and conv.marker == OPENINFERENCE_HANDOFF.marker:
        return _handoff(OPENINFERENCE_HANDOFF, attributes, status_error)
    tool_type = attributes.get(ADK_TRANSFER.type_key)
    if type(tool_type) is str and tool_type in ADK_TRANSFER.types:
        return _transfer(conv, attributes, status_error)
    call_id = _first(attributes, conv.call_id)
    raw_result = _first(attributes, conv.result)
    if type(raw_result) is str and raw_result.startswith(LANGGRAPH_HANDOFF.result_prefixes):
        found = _command_handoff(attributes, raw_result, status_error)
        if found is not None:
            return found
    result, result_error = unwrap_result(raw_result)
    return ToolSpan(
        convention=conv.name,
        tool=tool if type(tool) is str else str(tool) if tool is not None else "unknown",
        call_id=call_id if call_id is None or type(call_id) is str else str(call_id),
        arguments=unwrap_arguments(_first(attributes, conv.arguments)),
        result=result,
        error=_is_error(attributes, status_error) or result_error,
    )


def _handoff(conv: HandoffConvention, attributes: Mapping[str, Any], status_error: bool) -> ToolSpan:
    """action = (handoff, from agent, to agent); the result is the target, so a run handed
    to an agent it was already handed to brings nothing new."""
    source, target = _agent(_first(attributes, conv.from_agent)), _agent(_first(attributes, conv.to_agent))
    tagged = attributes.get(TOOL_NAME)
    return ToolSpan(
        convention=conv.name,
        tool=tagged if type(tagged) is str and tagged else handoff_name(source, target),
        call_id=None,
        arguments=handoff_arguments(source, target),
        result={TO: target} if target else None,
        error=_is_error(attributes, status_error),
    )


def _transfer(conv: ToolConvention, attributes: Mapping[str, Any], status_error: bool) -> ToolSpan:
    """A transfer tool as a handoff. Without its arguments (content capture off) the target is
    `?`, never the agent that acts next: the processor tags the call when it ends, as the
    receiver and the audit then read it, so the three agree (a ping-pong is still a cycle
    between the two sources' handoffs)."""
    source = _agent(_first(attributes, ADK_TRANSFER.from_agent))
    arguments = unwrap_arguments(_first(attributes, conv.arguments))
    if type(arguments) is str:
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            arguments = None
    target = _agent(arguments.get(ADK_TRANSFER.target_argument)) if isinstance(arguments, dict) else None
    tagged = attributes.get(TOOL_NAME)
    return ToolSpan(
        convention=conv.name,
        tool=tagged if type(tagged) is str and tagged else handoff_name(source, target),
        call_id=None,
        arguments=handoff_arguments(source, target or UNKNOWN_AGENT),
        result={TO: target} if target else None,
        error=_is_error(attributes, status_error),
    )


def _command_handoff(attributes: Mapping[str, Any], result: str, status_error: bool) -> Optional[ToolSpan]:
    """A LangGraph handoff tool (its result a Command to the parent graph) as a handoff."""
    try:
        command = json.loads(result)
    except ValueError:
        return None
    command = command.get("output", command) if isinstance(command, dict) else None
    target = command.get("goto") if isinstance(command, dict) else None
    if not isinstance(target, str) or not target:
        return None
    source = (_agent(_first(attributes, LANGGRAPH_HANDOFF.source)) or _metadata_agent(attributes)
              or node_of_namespace(_first(attributes, LANGGRAPH_HANDOFF.namespace)))
    tagged = attributes.get(TOOL_NAME)
    return ToolSpan(
        convention="langgraph",
        tool=tagged if type(tagged) is str and tagged else handoff_name(source, target),
        call_id=None,
        arguments=handoff_arguments(source, target),
        result={TO: target},
        error=_is_error(attributes, status_error),
    )


def _metadata_agent(attributes: Mapping[str, Any]) -> Optional[str]:
    """The source agent from the metadata JSON: `lc_agent_name`, else the node before the tool
    node in the checkpoint namespace."""
    for key in LANGGRAPH_HANDOFF.source_in_metadata:
        text = attributes.get(key)
        if type(text) is str and (LANGGRAPH_HANDOFF.metadata_key in text or LANGGRAPH_HANDOFF.namespace_key in text):
            try:
                meta = json.loads(text)
            except ValueError:
                continue
            if isinstance(meta, dict):
                return (_agent(meta.get(LANGGRAPH_HANDOFF.metadata_key))
                        or node_of_namespace(meta.get(LANGGRAPH_HANDOFF.namespace_key)))
    return None


def _agent(value: Any) -> Optional[str]:
    """An agent's name; OpenInference may record it as JSON text of a string."""
    if value is None or value == "":
        return None
    text = str(value)
    return text[1:-1] if len(text) > 1 and text[0] == text[-1] == '"' else text


def _tagged_tool(attributes: Mapping[str, Any], status_error: bool) -> ToolSpan:
    return ToolSpan(convention="loopguard", tool=str(attributes[TOOL_NAME]), call_id=None, arguments=None, result=None,
                    error=_is_error(attributes, status_error))


def _is_error(attributes: Mapping[str, Any], status_error: bool) -> bool:
    outcome = attributes.get(OUTCOME)
    if outcome is not None:
        return outcome == "error"
    return status_error or bool(attributes.get("error.type"))


def _model(conv: ModelConvention, attributes: Mapping[str, Any]) -> ModelSpan:
    model = _first(attributes, conv.model)
    return ModelSpan(
        convention=conv.name,
        model=str(model) if model is not None else None,
        input_tokens=_int(_first(attributes, conv.input_tokens)),
        output_tokens=_int(_first(attributes, conv.output_tokens)),
    )


def _int(v: Any) -> int:
    """A token count, or 0 for unknown: negative, non-finite, beyond int64 (what OTLP can
    carry; a bigger count would overflow the cost computation) or text int() cannot read."""
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return v if 0 <= v <= MAX_TOKENS else 0
    if isinstance(v, float):
        return int(v) if math.isfinite(v) and 0 <= v <= MAX_TOKENS else 0
    # isdecimal, not isdigit: "²" is a digit int() refuses. Any decimal digits, zeros first
    # or not, as int() reads them.
    if isinstance(v, str) and v.isdecimal():
        try:
            return _int(int(v))
        except ValueError:  # beyond int()'s digit limit (4300 by default): refused at once
            return 0
    return 0
