"""LangGraph multi-agent graphs whose agents hand the run on with `Command(goto=<agent>,
graph=Command.PARENT)`, driven by a scripted chat model (no network).

Two shapes, as the LangGraph multi-agent libraries build them:
- swarm: every agent has a `transfer_to_<other>` tool (langgraph-swarm);
- supervisor: a supervisor has one `transfer_to_<worker>` tool per worker, and each worker
  goes back to the supervisor by a plain edge when it has answered (langgraph-supervisor).

A handoff tool either declares its destination in its metadata (`__handoff_destination`, as
langgraph-swarm's and langgraph-supervisor's `create_handoff_tool` do) or not (a hand-made
tool: only the Command it returns says where it goes).
"""

from __future__ import annotations

from typing import Annotated, Any, Optional, Sequence

from langchain.agents import AgentState, create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from pydantic import Field

from otel_loopguard.enforce.guard import WRAP_UP
from otel_loopguard.enforce.langchain import HANDOFF_DESTINATION


def handoff_tool(target: str, declared: bool) -> BaseTool:
    @tool(f"transfer_to_{target}")
    def transfer(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Hand the conversation to another agent."""
        done = ToolMessage(content=f"Transferred to {target}", tool_call_id=tool_call_id, name=f"transfer_to_{target}")
        return Command(goto=target, graph=Command.PARENT, update={"messages": [done]})

    if declared:
        transfer.metadata = {HANDOFF_DESTINATION: target}
    return transfer


class RoutingModel(BaseChatModel):
    """Each request: a handoff to the next agent of `route`, or, when the route is used up,
    the answer "done". The agent asking is the system prompt (the agent's name); `asked`
    keeps it per request. Asked to wrap up (the guard stopped the run), it answers."""

    route: list = Field(default_factory=list)
    asked: list = Field(default_factory=list)
    model_name: str = "routing-chat"

    @property
    def _llm_type(self) -> str:
        return "routing-chat"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "RoutingModel":
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        agent = str(messages[0].content) if isinstance(messages[0], SystemMessage) else "?"
        self.asked.append(agent)
        i = len(self.asked)
        usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
        wrap_up = isinstance(messages[-1], HumanMessage) and messages[-1].content == WRAP_UP
        handoffs = sum(1 for a in self.asked[:-1] if a != "worker")  # requests that handed off
        target = self._next(agent, handoffs)
        if wrap_up or target is None:
            return _answer("wrapped up" if wrap_up else "done", i, usage)
        call = {"name": f"transfer_to_{target}", "args": {}, "id": f"call_{i}", "type": "tool_call"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[call], id=f"msg-{i}",
                                                                          usage_metadata=usage))])

    def _next(self, agent: str, handoffs: int) -> Optional[str]:
        if agent == "worker":
            return None  # a supervisor's worker answers; the edge takes the run back
        return self.route[handoffs] if handoffs < len(self.route) else None


def _answer(text: str, i: int, usage: dict[str, int]) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text, id=f"msg-{i}", usage_metadata=usage))])


def swarm(model: RoutingModel, middleware: Sequence[Any], declared: bool) -> Any:
    """triage and billing, each with a handoff tool to the other."""
    graph = StateGraph(AgentState)
    for name, other in (("triage", "billing"), ("billing", "triage")):
        agent = create_agent(model, tools=[handoff_tool(other, declared)], system_prompt=name, name=name,
                             middleware=list(middleware))
        graph.add_node(name, agent, destinations=(other,))
    graph.add_edge(START, "triage")
    return graph.compile()


def supervisor(model: RoutingModel, middleware: Sequence[Any], declared: bool,
               workers: Sequence[str] = ("billing", "shipping", "refund")) -> Any:
    """A supervisor with a handoff tool per worker; each worker answers and goes back to it."""
    graph = StateGraph(AgentState)
    boss = create_agent(model, tools=[handoff_tool(w, declared) for w in workers], system_prompt="supervisor",
                        name="supervisor", middleware=list(middleware))
    graph.add_node("supervisor", boss, destinations=tuple(workers))
    for w in workers:
        graph.add_node(w, create_agent(model, tools=[], system_prompt="worker", name=w))
        graph.add_edge(w, "supervisor")
    graph.add_edge(START, "supervisor")
    return graph.compile()


def run(app: Any) -> dict[str, Any]:
    return app.invoke({"messages": [HumanMessage("My invoice is wrong.")]}, {"recursion_limit": 200})
