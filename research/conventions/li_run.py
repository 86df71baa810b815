"""LlamaIndex FunctionAgent / AgentWorkflow + OpenInference or OpenLLMetry, scripted LLM, no network.

Usage: python li_run.py --instr {openinference,traceloop} --scenario NAME [--out NAME]

The LLM is llama_index.core.llms.mock.MockFunctionCallingLLM with a response_generator that plays
the scenario (tool calls as ToolSelection in additional_kwargs, as the mock reads them; token counts
as OpenAI-style keys beside them). Agents run with streaming=False. A subclass overriding chat() was
tried and dropped: LlamaIndex's dispatcher traces the override and the base method as two spans.

Scenarios: fw_common.SCENARIOS (in `errors` flaky_tool raises; the workflow turns the exception into
ToolOutput(is_error=True) for the model and the run goes on), plus
  handoff-pingpong   AgentWorkflow triage <-> billing by its `handoff` tool ({"to_agent", "reason"}),
                     6 handoffs, then "done"
  handoff-single     one handoff triage -> billing, which answers
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-no-network")
os.environ.setdefault("TRACELOOP_TELEMETRY", "false")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import fw_common as fw  # noqa: E402

H = "handoff"
EXTRA = {
    "handoff-pingpong": ([[(f"h{i}", H, {"to_agent": "billing" if i % 2 else "triage", "reason": "route"})]
                          for i in range(1, 7)] + ["done"],
                         {"tool_calls": 6, "errors": 0, "must": ["cycle/stop"], "quiet": False,
                          "note": "6 handoffs triage<->billing: a handoff ping-pong"}),
    "handoff-single": ([[("h1", H, {"to_agent": "billing", "reason": "route"})], "done"],
                       {"tool_calls": 1, "errors": 0, "must": [], "quiet": True}),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["openinference", "traceloop"])
    ap.add_argument("--scenario", required=True, choices=list(fw.SCENARIOS) + list(EXTRA))
    ap.add_argument("--content", default="default", choices=["default", "off"],
                    help="off: the instrumentation's content switch (fw_common.CONTENT_OFF_ENV)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.content == "off":
        fw.content_off(args.instr)
    turns, expected = EXTRA[args.scenario] if args.scenario in EXTRA else (
        fw.SCENARIOS[args.scenario], fw.EXPECTED[args.scenario])

    provider, exporter, recorder = fw.setup()
    with common.Timer() as t_import:
        from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
        from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
        from llama_index.core.llms.llm import ToolSelection
        from llama_index.core.llms.mock import MockFunctionCallingLLM
        from llama_index.core.tools import FunctionTool

    if args.instr == "openinference":
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        LlamaIndexInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["openinference-instrumentation-llama-index", "openinference-instrumentation",
                "openinference-semantic-conventions"]
    else:
        from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor

        LlamaIndexInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["opentelemetry-instrumentation-llamaindex", "opentelemetry-semantic-conventions-ai"]
    pkgs += ["llama-index-core", "llama-index-workflows", "llama-index-instrumentation"]

    script = fw.Script(turns)

    def generator(messages, **kwargs) -> "ChatMessage":
        i, step, usage = script.next()
        tin, tout = usage  # the mock has no usage of its own; OpenAI-style keys in additional_kwargs
        kw = {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}
        if isinstance(step, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=step, additional_kwargs=kw)
        return ChatMessage(role=MessageRole.ASSISTANT, content="", additional_kwargs={
            **kw, "tool_calls": [ToolSelection(tool_id=c, tool_name=n, tool_kwargs=a) for c, n, a in step]})

    llm = MockFunctionCallingLLM(response_generator=generator, is_chat_model=True)

    def lookup_order(order_id: str) -> str:
        """Look up an order's status."""
        recorder.probe("lookup_order")
        return fw.lookup_order(order_id)

    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping."""
        recorder.probe("get_shipping")
        return fw.get_shipping(order_id)

    def flaky_tool(x: int, mode: str) -> str:
        """A tool that always fails."""
        recorder.probe("flaky_tool")
        return fw.flaky(x, mode)

    tools = [FunctionTool.from_defaults(fn=f) for f in (lookup_order, get_shipping, flaky_tool)]
    if args.scenario.startswith("handoff"):
        triage = FunctionAgent(name="triage", description="Routes requests.", system_prompt="Route the user.",
                               tools=[FunctionTool.from_defaults(fn=lookup_order)], llm=llm, streaming=False,
                               can_handoff_to=["billing"])
        billing = FunctionAgent(name="billing", description="Handles billing.", system_prompt="Billing questions.",
                                tools=[FunctionTool.from_defaults(fn=lookup_order)], llm=llm, streaming=False,
                                can_handoff_to=["triage"])
        agent = AgentWorkflow(agents=[triage, billing], root_agent="triage")
    else:
        agent = FunctionAgent(name="order_agent", description="Looks up orders.", system_prompt="Look up orders.",
                              tools=tools, llm=llm, streaming=False)

    async def run():
        return await agent.run(user_msg="Where is order A-1?", max_iterations=40)

    with common.Timer() as t_run:
        outcome, result = fw.run_guarded(lambda: asyncio.run(run()))
    final = getattr(getattr(result, "response", None), "content", None) if result is not None else None
    name = args.out or fw.out_name(f"li_{args.instr}__{args.scenario}", args.content)
    fw.finish(name, provider, exporter, recorder, scenario=args.scenario, turns=turns, expected=expected,
              versions=pkgs, outcome=outcome, final=final, t_import=t_import, t_run=t_run)


if __name__ == "__main__":
    main()
