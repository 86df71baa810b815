"""A LangGraph supervisor (langgraph-supervisor's `create_supervisor`) + an OTel instrumentation,
scripted chat model, no network.

Usage: python lg_supervisor_run.py --instr {openinference,traceloop} [--scenario {supervisor,bounce}] [--out NAME]

The supervisor hands the run to its workers with the library's handoff tools
(`transfer_to_<worker>`, returning `Command(goto=<worker>, graph=Command.PARENT)`); each worker
(a LangChain v1 `create_agent`) answers and goes back to the supervisor by the graph's edge.
  supervisor  legitimate routing: billing, shipping, refund (three different handoffs), then
              the supervisor answers "done" (the negative control)
  bounce      its twin: the supervisor sends the run to billing, shipping, billing, ... 6 times,
              then answers "done" (two workers bounced between: a loop)
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from lg_handoff_run import _scrub  # noqa: E402

WORKERS = ("billing", "shipping", "refund")
ROUTES = {"supervisor": ["billing", "shipping", "refund"], "bounce": ["billing", "shipping"] * 3}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["openinference", "traceloop"])
    ap.add_argument("--scenario", default="supervisor", choices=sorted(ROUTES))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    route = ROUTES[args.scenario]

    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph_supervisor import create_supervisor

    provider, exporter, recorder = common.setup()
    if args.instr == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["openinference-instrumentation-langchain", "openinference-instrumentation"]
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["opentelemetry-instrumentation-langchain", "opentelemetry-semantic-conventions-ai"]

    state = {"i": 0, "handoffs": 0}

    class ScriptedChatModel(BaseChatModel):
        """The supervisor (system prompt "supervisor") calls the next handoff tool of the route,
        then answers; a worker answers at once."""

        model_name: str = "scripted-chat"

        @property
        def _llm_type(self) -> str:
            return "scripted-chat"

        def bind_tools(self, tools, **kwargs):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            i = state["i"]
            state["i"] += 1
            usage = {"input_tokens": 100 + 10 * i, "output_tokens": 7 + i, "total_tokens": 107 + 11 * i}
            first = messages[0] if messages else None
            asking = first.content if isinstance(first, SystemMessage) else ""
            if asking == "supervisor" and state["handoffs"] < len(route):
                target = route[state["handoffs"]]
                state["handoffs"] += 1
                msg = AIMessage(content="", usage_metadata=usage, id=f"run-msg-{i}", tool_calls=[
                    {"name": f"transfer_to_{target}", "args": {}, "id": f"call_h{i}", "type": "tool_call"}])
            else:
                msg = AIMessage(content="done" if asking == "supervisor" else f"{asking}: handled",
                                usage_metadata=usage, id=f"run-msg-{i}")
            return ChatResult(generations=[ChatGeneration(message=msg)])

    model = ScriptedChatModel()
    workers = [create_agent(model, tools=[], system_prompt=w, name=w) for w in WORKERS]
    app = create_supervisor(workers, model=model, prompt="supervisor").compile()

    with common.Timer() as t_run:
        result = app.invoke({"messages": [HumanMessage("My invoice is wrong and my parcel is late.")]},
                            {"recursion_limit": 100})
    provider.force_flush()
    final = result["messages"][-1].content
    combo = {"openinference": "lg_openinference", "traceloop": "lg_traceloop"}[args.instr]
    name = args.out or f"{combo}__handoff_{args.scenario}"
    meta = {"combo": combo, "scenario": args.scenario, "python": common.python_version(),
            "versions": common.versions(["langchain", "langchain-core", "langgraph", "langgraph-supervisor",
                                         "opentelemetry-sdk"] + pkgs),
            "final_output": final, "run_seconds": t_run.seconds, "route": route}
    folder = os.path.join(common.CAPTURES, "handoffs")
    path = os.path.join(folder, name + ".json")
    rows = common.dump(path, exporter, recorder, meta)
    _scrub(path)
    print(f"{name}: {len(rows)} spans, run {t_run.seconds}s, final={final!r}")
    tree = common.tree(rows)
    with open(os.path.join(folder, name + ".tree.txt"), "w") as f:
        f.write(tree + "\n")
    print(tree)


if __name__ == "__main__":
    main()
