"""LangChain v1 create_agent (LangGraph) + an OTel instrumentation, scripted chat model, no network.

Usage: python lc_run.py --instr {openinference,traceloop} [--invoke {sync,async}]
                        [--error {middleware,toolexception,raise}] [--content {default,instr-off}] [--out NAME]

Scenario (same as oa_run.py):
  turns 1-3: lookup_order({"order_id": "A-1"}); turn 4: the same call twice in one AIMessage;
  turn 5: flaky_tool({"x": 1, "mode": "fast"}) fails; turn 6: final answer "done".
--error selects how the failure reaches the agent:
  middleware    - flaky_tool raises RuntimeError, langchain.agents.middleware.ToolErrorMiddleware turns it
                  into ToolMessage(status="error") (without it, create_agent's ToolNode re-raises and the run dies)
  toolexception - flaky_tool raises langchain_core.tools.ToolException with handle_tool_error=True
  raise         - flaky_tool raises RuntimeError, no handler: the run aborts (captures the error path)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SCRIPT = [
    [("call_t1", "lookup_order", {"order_id": "A-1"})],
    [("call_t2", "lookup_order", {"order_id": "A-1"})],
    [("call_t3", "lookup_order", {"order_id": "A-1"})],
    [("call_t4a", "lookup_order", {"order_id": "A-1"}), ("call_t4b", "lookup_order", {"order_id": "A-1"})],
    [("call_t5", "flaky_tool", {"x": 1, "mode": "fast"})],
    "done",
]
USAGE = [(100 + 10 * i, 7 + i) for i in range(len(SCRIPT))]

CONTENT_OFF_ENV = {
    "openinference": {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"},
    "traceloop": {"TRACELOOP_TRACE_CONTENT": "false"},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["openinference", "traceloop"])
    ap.add_argument("--invoke", default="sync", choices=["sync", "async"])
    ap.add_argument("--error", default="middleware", choices=["middleware", "toolexception", "raise"])
    ap.add_argument("--content", default="default", choices=["default", "instr-off"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.content == "instr-off":
        os.environ.update(CONTENT_OFF_ENV[args.instr])

    with common.Timer() as t_import:
        from langchain.agents import create_agent
        from langchain.agents.middleware import ToolErrorMiddleware
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.tools import ToolException, tool

    provider, exporter, recorder = common.setup()
    if args.instr == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["openinference-instrumentation-langchain", "openinference-instrumentation",
                "openinference-semantic-conventions"]
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["opentelemetry-instrumentation-langchain", "opentelemetry-semantic-conventions-ai"]

    state = {"i": 0}

    class ScriptedChatModel(BaseChatModel):
        """Returns the scripted AIMessages in order; bind_tools is a no-op."""

        model_name: str = "scripted-chat"

        @property
        def _llm_type(self) -> str:
            return "scripted-chat"

        @property
        def _identifying_params(self):
            return {"model_name": self.model_name}

        def bind_tools(self, tools, **kwargs):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            i = state["i"]
            state["i"] += 1
            step, (tin, tout) = SCRIPT[i], USAGE[i]
            usage = {"input_tokens": tin, "output_tokens": tout, "total_tokens": tin + tout}
            meta = {"model_name": self.model_name, "finish_reason": "stop" if isinstance(step, str) else "tool_calls"}
            if isinstance(step, str):
                msg = AIMessage(content=step, usage_metadata=usage, response_metadata=meta, id=f"run-msg-{i}")
            else:
                msg = AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": c, "type": "tool_call"}
                                                        for c, n, a in step],
                                usage_metadata=usage, response_metadata=meta, id=f"run-msg-{i}")
            return ChatResult(generations=[ChatGeneration(message=msg)],
                              llm_output={"token_usage": {"prompt_tokens": tin, "completion_tokens": tout,
                                                          "total_tokens": tin + tout},
                                          "model_name": self.model_name})

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order's status."""
        recorder.probe("lookup_order")
        return f"order {order_id}: pending"

    if args.error == "toolexception":
        @tool
        def flaky_tool(x: int, mode: str) -> str:
            """A tool that always fails."""
            recorder.probe("flaky_tool")
            raise ToolException(f"flaky_tool exploded on x={x}")

        flaky_tool.handle_tool_error = True
    else:
        @tool
        def flaky_tool(x: int, mode: str) -> str:
            """A tool that always fails."""
            recorder.probe("flaky_tool")
            raise RuntimeError(f"flaky_tool exploded on x={x}")

    middleware = []
    if args.error == "middleware":
        middleware = [ToolErrorMiddleware(on_error=lambda exc, req: f"error: {type(exc).__name__}: {exc}")]

    agent = create_agent(ScriptedChatModel(), tools=[lookup_order, flaky_tool], system_prompt="Look up orders.",
                         middleware=middleware, name="order_agent")
    inp = {"messages": [HumanMessage("Where is order A-1?")]}
    outcome = "ok"
    with common.Timer() as t_run:
        try:
            if args.invoke == "sync":
                result = agent.invoke(inp, {"recursion_limit": 50})
            else:
                result = asyncio.run(agent.ainvoke(inp, {"recursion_limit": 50}))
            final = result["messages"][-1].content
        except Exception as e:  # the "raise" variant
            outcome, final = f"raised {type(e).__name__}: {e}", None
    provider.force_flush()

    combo = {"openinference": "lc_openinference", "traceloop": "lc_traceloop"}[args.instr]
    name = args.out or "__".join(
        [combo, args.invoke, args.error] + ([] if args.content == "default" else [args.content]))
    meta = {
        "combo": combo, "invoke": args.invoke, "error_style": args.error, "content": args.content,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("OPENINFERENCE_", "TRACELOOP_"))},
        "python": common.python_version(),
        "versions": common.versions(["langchain", "langchain-core", "langgraph", "langgraph-prebuilt",
                                     "opentelemetry-sdk", "opentelemetry-api"] + pkgs),
        "final_output": final, "outcome": outcome,
        "import_seconds": t_import.seconds, "run_seconds": t_run.seconds,
        "script": [s if isinstance(s, str) else [[c, n, a] for c, n, a in s] for s in SCRIPT],
    }
    rows = common.dump(os.path.join(common.CAPTURES, name + ".json"), exporter, recorder, meta)
    print(f"{name}: {len(rows)} spans, run {t_run.seconds}s, final={final!r}, outcome={outcome}")
    tree = common.tree(rows)
    with open(os.path.join(common.CAPTURES, name + ".tree.txt"), "w") as f:
        f.write(tree + "\n")
    print(tree)


if __name__ == "__main__":
    main()
