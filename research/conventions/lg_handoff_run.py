"""LangGraph multi-agent handoffs (swarm style, `Command(goto=..., graph=Command.PARENT)`) + an OTel
instrumentation, scripted chat model, no network.

Usage: python lg_handoff_run.py --instr {openinference,traceloop} [--scenario {pingpong,single}] [--out NAME]

Two LangChain v1 `create_agent` agents (triage, billing) are nodes of a parent StateGraph. Each
has a handoff tool, `transfer_to_<other>`, that returns a Command sending the run to the other
node of the parent graph, as langgraph-swarm's handoff tools do.
  pingpong  the agents hand the run to each other 8 times, then billing answers "done"
  single    triage hands to billing once, billing answers "done"
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Annotated

from langchain_core.tools import InjectedToolCallId
from langgraph.types import Command

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

TARGETS = {"pingpong": ["billing", "triage"] * 4 + [None], "single": ["billing", None]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["openinference", "traceloop"])
    ap.add_argument("--scenario", default="pingpong", choices=sorted(TARGETS))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    script = TARGETS[args.scenario]

    from langchain.agents import AgentState, create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.graph import START, StateGraph

    provider, exporter, recorder = common.setup()
    if args.instr == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["openinference-instrumentation-langchain", "openinference-instrumentation"]
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["opentelemetry-instrumentation-langchain", "opentelemetry-semantic-conventions-ai"]

    state = {"i": 0}

    class ScriptedChatModel(BaseChatModel):
        """Each request: a call of the next scripted handoff tool, or the final answer."""

        model_name: str = "scripted-chat"

        @property
        def _llm_type(self) -> str:
            return "scripted-chat"

        def bind_tools(self, tools, **kwargs):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            i = state["i"]
            state["i"] += 1
            target = script[i]
            usage = {"input_tokens": 100 + 10 * i, "output_tokens": 7 + i, "total_tokens": 107 + 11 * i}
            if target is None:
                msg = AIMessage(content="done", usage_metadata=usage, id=f"run-msg-{i}")
            else:
                msg = AIMessage(content="", usage_metadata=usage, id=f"run-msg-{i}", tool_calls=[
                    {"name": f"transfer_to_{target}", "args": {}, "id": f"call_h{i}", "type": "tool_call"}])
            return ChatResult(generations=[ChatGeneration(message=msg)])

    def handoff_tool(target: str):
        @tool(f"transfer_to_{target}")
        def transfer(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
            """Hand the conversation to another agent."""
            done = ToolMessage(content=f"Transferred to {target}", tool_call_id=tool_call_id,
                               name=f"transfer_to_{target}")
            return Command(goto=target, graph=Command.PARENT, update={"messages": [done]})

        return transfer

    model = ScriptedChatModel()
    triage = create_agent(model, tools=[handoff_tool("billing")], system_prompt="Route.", name="triage")
    billing = create_agent(model, tools=[handoff_tool("triage")], system_prompt="Bill.", name="billing")
    graph = StateGraph(AgentState)
    graph.add_node("triage", triage, destinations=("billing",))
    graph.add_node("billing", billing, destinations=("triage",))
    graph.add_edge(START, "triage")
    app = graph.compile()

    with common.Timer() as t_run:
        result = app.invoke({"messages": [HumanMessage("My invoice is wrong.")]}, {"recursion_limit": 100})
    provider.force_flush()
    final = result["messages"][-1].content
    combo = {"openinference": "lg_openinference", "traceloop": "lg_traceloop"}[args.instr]
    name = args.out or f"{combo}__handoff_{args.scenario}"
    meta = {"combo": combo, "scenario": args.scenario, "python": common.python_version(),
            "versions": common.versions(["langchain", "langchain-core", "langgraph", "opentelemetry-sdk"] + pkgs),
            "final_output": final, "run_seconds": t_run.seconds, "script": script}
    folder = os.path.join(common.CAPTURES, "handoffs")
    path = os.path.join(folder, name + ".json")
    rows = common.dump(path, exporter, recorder, meta)
    _scrub(path)
    print(f"{name}: {len(rows)} spans, run {t_run.seconds}s, final={final!r}")
    tree = common.tree(rows)
    with open(os.path.join(folder, name + ".tree.txt"), "w") as f:
        f.write(tree + "\n")
    print(tree)


def _scrub(path: str) -> None:
    """No machine paths in a committed capture: stack traces name <site-packages>/ and <stdlib>/,
    as the other captures do."""
    import re
    import sysconfig

    with open(path) as f:
        text = f.read()
    text = re.sub(r'/[^"\\ ]*/site-packages/', "<site-packages>/", text)
    text = text.replace(sysconfig.get_paths()["stdlib"] + "/", "<stdlib>/")
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
