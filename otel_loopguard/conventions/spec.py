"""Which span attributes carry what, per instrumentation convention (data, not code)."""

from __future__ import annotations

from dataclasses import dataclass

from . import mcp


@dataclass(frozen=True)
class ToolConvention:
    name: str
    marker: str  # attribute that identifies the span kind
    marker_values: frozenset[str]  # values of `marker` that mean "tool call"
    tool: str
    call_id: tuple[str, ...]
    arguments: tuple[str, ...]
    result: tuple[str, ...]
    # A marker value shared with spans that are no tool calls: the span is one only when it
    # also carries this attribute (conventions in TASK_TOOL_CONVENTIONS).
    requires: str = ""


@dataclass(frozen=True)
class ModelConvention:
    name: str
    marker: str
    marker_values: frozenset[str]
    model: tuple[str, ...]
    input_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]


GENAI_TOOL = ToolConvention(
    name="gen_ai",
    marker="gen_ai.operation.name",
    marker_values=frozenset({"execute_tool"}),
    tool="gen_ai.tool.name",
    call_id=("gen_ai.tool.call.id",),
    # input.value: OpenInference's arguments, when it shares the span (Google ADK: ADK's own
    # GenAI keys carry no arguments by default; OpenInference adds them). Its output.value is
    # not read as the result: for ADK it embeds the call id.
    arguments=("gen_ai.tool.call.arguments", "gen_ai.tool.arguments", "input.value"),
    result=("gen_ai.tool.call.result", "gen_ai.tool.result"),
)

OPENINFERENCE_TOOL = ToolConvention(
    name="openinference",
    marker="openinference.span.kind",
    marker_values=frozenset({"TOOL", "tool"}),
    tool="tool.name",
    call_id=("tool_call.id", "tool.id"),
    arguments=("tool.parameters_value", "input.value"),
    result=("output.value",),
)

TRACELOOP_TOOL = ToolConvention(
    name="traceloop",
    marker="traceloop.span.kind",
    marker_values=frozenset({"tool"}),
    tool="traceloop.entity.name",
    call_id=("gen_ai.tool.call.id",),
    arguments=("traceloop.entity.input",),
    result=("traceloop.entity.output",),
)

# MCP first: its tool spans also carry the GenAI marker, and one without content is no call.
MCP_TOOL = ToolConvention(name="mcp", marker=mcp.METHOD, marker_values=frozenset({mcp.TOOLS_CALL}), tool=mcp.TOOL,
                          call_id=mcp.CALL_ID, arguments=mcp.ARGUMENTS, result=mcp.RESULT)
TOOL_CONVENTIONS = (MCP_TOOL, GENAI_TOOL, OPENINFERENCE_TOOL, TRACELOOP_TOOL)

# OpenLLMetry on LlamaIndex marks a tool call as a `task`, like every other step of the
# workflow; only the tool's name tells it apart (research/conventions/FINDINGS.md, 8.4). The
# result, the error flag and the call id live in `traceloop.entity.output` (conventions/payloads.py).
TRACELOOP_TASK_TOOL = ToolConvention(
    name="traceloop_task",
    marker="traceloop.span.kind",
    marker_values=frozenset({"task"}),
    tool="tool.name",
    call_id=(),
    arguments=("tool.arguments",),
    result=("traceloop.entity.output",),
    requires="tool.name",
)
# Checked after the tool conventions, handoffs and tagged tools, before the model conventions
# (a `task` span without a tool name may be a model call). A span marked so is never numbered
# when it starts: whether it is a call is known only once it carries the tool's name.
TASK_TOOL_CONVENTIONS = (TRACELOOP_TASK_TOOL,)

# Tool spans that are no call of their own: Google ADK's `execute_tool (merged)`, a summary
# span written after a decision's parallel calls, each of which has its own span.
IGNORED_TOOLS = frozenset({"(merged tools)"})

GENAI_MODEL = ModelConvention(
    name="gen_ai",
    marker="gen_ai.operation.name",
    marker_values=frozenset({"chat", "text_completion", "generate_content"}),
    model=("gen_ai.response.model", "gen_ai.request.model"),
    input_tokens=("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
    output_tokens=("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
)

OPENINFERENCE_MODEL = ModelConvention(
    name="openinference",
    marker="openinference.span.kind",
    marker_values=frozenset({"LLM", "llm"}),
    model=("llm.model_name",),
    input_tokens=("llm.token_count.prompt",),
    output_tokens=("llm.token_count.completion",),
)

TRACELOOP_MODEL = ModelConvention(
    name="traceloop",
    marker="llm.request.type",
    marker_values=frozenset({"chat", "completion"}),
    model=("gen_ai.response.model", "gen_ai.request.model"),
    input_tokens=("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
    output_tokens=("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
)

MODEL_CONVENTIONS = (GENAI_MODEL, OPENINFERENCE_MODEL, TRACELOOP_MODEL)


@dataclass(frozen=True)
class HandoffConvention:
    """One agent handing the run to another (research/conventions/captures/*handoff*).

    `span_name_prefix`: the handoff is a span of the tool convention named `marker`'s, told
    apart only by its name and its missing tool name (OpenInference: `handoff to X`)."""

    name: str
    marker: str
    marker_values: frozenset[str]
    from_agent: tuple[str, ...]
    to_agent: tuple[str, ...]  # empty: the instrumentation never knows the target
    span_name_prefix: str = ""


GENAI_HANDOFF = HandoffConvention(
    name="gen_ai",
    marker="gen_ai.operation.name",
    marker_values=frozenset({"agent_handoff"}),
    from_agent=("gen_ai.handoff.from_agent",),
    to_agent=("gen_ai.handoff.to_agent",),
)

# OpenLLMetry opens the span before the SDK knows the target (`<source> → unknown.handoff`):
# the target is the agent that acts next (conventions/handoffs.py).
TRACELOOP_HANDOFF = HandoffConvention(
    name="traceloop",
    marker="traceloop.span.kind",
    marker_values=frozenset({"handoff"}),
    from_agent=("gen_ai.handoff.from_agent", "gen_ai.agent.name"),
    to_agent=("gen_ai.handoff.to_agent",),
)

# A TOOL span with no tool name: source agent in input.value, target in output.value.
OPENINFERENCE_HANDOFF = HandoffConvention(
    name="openinference",
    marker="openinference.span.kind",
    marker_values=frozenset({"TOOL", "tool"}),
    from_agent=("input.value",),
    to_agent=("output.value",),
    span_name_prefix="handoff to ",
)

@dataclass(frozen=True)
class TransferTool:
    """A tool call whose tool type says it hands the run to another agent: a handoff from the
    agent that calls it to the agent its arguments name. Google ADK's `transfer_to_agent`
    (`gen_ai.tool.type=TransferToAgentTool`, the caller in `gen_ai.agent.name`, the target in
    the `agent_name` argument, recorded only with content capture on)."""

    type_key: str
    types: frozenset[str]
    from_agent: tuple[str, ...]
    target_argument: str


ADK_TRANSFER = TransferTool(type_key="gen_ai.tool.type", types=frozenset({"TransferToAgentTool"}),
                            from_agent=("gen_ai.agent.name",), target_argument="agent_name")
# What recognise() reads of a tool span beyond its convention's keys (a reader that decodes
# only the keys recognise() needs, as the receiver does, must read these too).
TOOL_EXTRA_KEYS = (ADK_TRANSFER.type_key, *ADK_TRANSFER.from_agent)


@dataclass(frozen=True)
class ManagedAgents:
    """An agent span that lists the agents it manages (smolagents + OpenInference:
    `smolagents.managed_agents.<n>.name` on the manager's `<agent>.run` AGENT span). A listed
    agent's own agent span under it, with no tool span between, is the manager delegating to it:
    a call of that agent, its task the arguments and its answer the result. Only the span tree
    tells it (the managed agent's span names no agent but in its span name, `<agent>.<method>`)."""

    marker: str
    marker_values: frozenset[str]
    declared_prefix: str
    declared_suffix: str
    tool_marker_values: frozenset[str]  # the marker's values of a tool span: a call already
    arguments: tuple[str, ...]
    result: tuple[str, ...]


SMOLAGENTS_MANAGED = ManagedAgents(marker="openinference.span.kind", marker_values=frozenset({"AGENT", "agent"}),
                                   declared_prefix="smolagents.managed_agents.", declared_suffix=".name",
                                   tool_marker_values=frozenset({"TOOL", "tool"}), arguments=("input.value",),
                                   result=("output.value",))


# Handoffs with a marker of their own, checked after the tool conventions (a marker value of
# a tool convention is a tool span first).
MARKED_HANDOFFS = (GENAI_HANDOFF, TRACELOOP_HANDOFF)
HANDOFF_CONVENTIONS = (*MARKED_HANDOFFS, OPENINFERENCE_HANDOFF)



@dataclass(frozen=True)
class AgentConvention:
    """A span of one agent's invocation, and where the agent's name lives. Read only to give a
    handoff whose span never names its target (OpenLLMetry) the agent that acts next: the
    agent of the first agent span that starts after it (conventions/handoffs.py)."""

    name: str
    marker: str
    marker_values: frozenset[str]
    agent: tuple[str, ...]


# OpenLLMetry's `<Agent>.agent` spans carry both markers; the GenAI one alone is what the
# semantic conventions name an agent's invocation (a span without the name is no agent span).
TRACELOOP_AGENT = AgentConvention(
    name="traceloop",
    marker="traceloop.span.kind",
    marker_values=frozenset({"agent"}),
    agent=("gen_ai.agent.name",),
)
GENAI_AGENT = AgentConvention(
    name="gen_ai",
    marker="gen_ai.operation.name",
    marker_values=frozenset({"invoke_agent"}),
    agent=("gen_ai.agent.name",),
)
AGENT_CONVENTIONS = (TRACELOOP_AGENT, GENAI_AGENT)


@dataclass(frozen=True)
class CommandHandoff:
    """A tool whose result is a LangGraph `Command(goto=<node>, graph=Command.PARENT)`: the
    swarm / supervisor handoff tools. Told by the result's opening (a prefix test costs the
    same whatever the result's size), the target in `goto`; the source agent is LangChain's
    `lc_agent_name`, in the metadata the instrumentation copies onto the span, else (an agent
    built without it: langgraph-supervisor's supervisor is a `create_react_agent`) the node
    the agent runs as in the parent graph, from LangGraph's checkpoint namespace
    (`supervisor:<task>|tools:<task>`: the node before the tool node)."""

    result_prefixes: tuple[str, ...]
    source: tuple[str, ...]  # attributes holding the agent name itself
    source_in_metadata: tuple[str, ...]  # JSON objects holding it under `metadata_key`
    metadata_key: str
    namespace: tuple[str, ...]  # attributes holding the checkpoint namespace
    namespace_key: str  # ... and its key in the metadata JSON


LANGGRAPH_HANDOFF = CommandHandoff(
    result_prefixes=('{"graph": "__parent__"', '{"output": {"graph": "__parent__"'),
    source=("traceloop.association.properties.lc_agent_name",),
    source_in_metadata=("metadata",),
    metadata_key="lc_agent_name",
    namespace=("traceloop.association.properties.langgraph_checkpoint_ns",),
    namespace_key="langgraph_checkpoint_ns",
)