"""Pydantic AI + its built-in OTel GenAI instrumentation (and OpenInference's span processor on
top of it), FunctionModel, no network.

Usage: python pai_run.py --instr {genai,openinference} --scenario NAME [--out NAME]

Scenarios: fw_common.SCENARIOS, plus
  errors-raise   flaky_tool raises RuntimeError (no ModelRetry): Pydantic AI aborts the run
  delegate       agent delegation: the orchestrator's tool ask_specialist runs a second agent
                 (which calls lookup_order(A-1) then answers); the orchestrator asks the same
                 question in 4 turns (a delegation loop)
  delegate-ok    one delegation; the sub-agent calls lookup_order(A-1), get_shipping(A-1)
In `errors` flaky_tool raises ModelRetry (the way a Pydantic AI tool reports a failure to the
model), with retries=10 so the run is not cut at the default 1 retry.

--instr genai:          Agent.instrument_all(InstrumentationSettings(tracer_provider=...)) only
--instr openinference:  the same, plus openinference.instrumentation.pydantic_ai.OpenInferenceSpanProcessor
                        (it rewrites the built-in spans at on_end; there is no separate instrumentor)
"""

# no `from __future__ import annotations`: Pydantic AI reads the tools' type hints at runtime

import argparse
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import fw_common as fw  # noqa: E402

EXTRA = {
    "errors-raise": ([[("c1", "flaky_tool", fw.BAD)], "done"],
                     {"tool_calls": 1, "errors": 1, "must": [], "quiet": True,
                      "note": "the run aborts at the first raise; 1 failed call is no loop"}),
    "delegate": ([[(f"c{i}", "ask_specialist", {"question": "status of A-1?"})] for i in range(1, 5)] + ["done"],
                 {"tool_calls": 8, "errors": 0, "must": ["cycle/stop"], "quiet": False,
                  "note": "4 delegations x (ask_specialist, sub-agent lookup_order): same 2-call pattern x4"}),
    "delegate-ok": ([[("c1", "ask_specialist", {"question": "status and shipping of A-1?"})], "done"],
                    {"tool_calls": 3, "errors": 0, "must": [], "quiet": True}),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["genai", "openinference"])
    ap.add_argument("--scenario", required=True, choices=list(fw.SCENARIOS) + list(EXTRA))
    ap.add_argument("--content", default="default", choices=["default", "off"],
                    help="off: the instrumentation's content switch (fw_common.CONTENT_OFF_ENV)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.content == "off":
        fw.content_off("openinference" if args.instr == "openinference" else "")
    if args.scenario in EXTRA:
        turns, expected = EXTRA[args.scenario]
    else:
        turns, expected = fw.SCENARIOS[args.scenario], fw.EXPECTED[args.scenario]

    with common.Timer() as t_import:
        from pydantic_ai import Agent, ModelRetry, RunContext
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.models.instrumented import InstrumentationSettings
        from pydantic_ai.usage import RequestUsage

    extra = ()
    pkgs = ["pydantic-ai-slim", "pydantic", "logfire-api"]
    if args.instr == "openinference":
        from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor

        extra = (OpenInferenceSpanProcessor(),)
        pkgs += ["openinference-instrumentation-pydantic-ai", "openinference-instrumentation",
                 "openinference-semantic-conventions"]
    provider, exporter, recorder = fw.setup(extra)
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, include_content=args.content != "off"))

    script = fw.Script(turns)

    def scripted(messages, info: AgentInfo) -> ModelResponse:
        i, step, (tin, tout) = script.next()
        usage = RequestUsage(input_tokens=tin, output_tokens=tout)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)], usage=usage, model_name="scripted-model")
        return ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=c) for c, n, a in step], usage=usage,
                             model_name="scripted-model")

    sub_calls = ([("s1", "lookup_order", fw.A1), ("s2", "get_shipping", fw.A1)] if args.scenario == "delegate-ok"
                 else [("s1", "lookup_order", fw.A1)])

    sub_ids = {"n": 0}

    def specialist_model(messages, info: AgentInfo) -> ModelResponse:
        # stateless: call the next sub-agent tool not yet answered in this sub-run, then answer
        done = sum(1 for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart))
        usage = RequestUsage(input_tokens=50 + done, output_tokens=5)
        if done < len(sub_calls):
            c, n, a = sub_calls[done]
            sub_ids["n"] += 1  # unique per trace, as a real provider's ids are (a per-sub-run counter such
            # as "s1" in every sub-run made the audit see one call id with different records: integrity_conflict)
            return ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=f"{c}_{sub_ids['n']}")], usage=usage,
                                 model_name="specialist-model")
        return ModelResponse(parts=[TextPart("A-1 is pending")], usage=usage, model_name="specialist-model")

    def add_order_tools(agent) -> None:
        @agent.tool_plain
        def lookup_order(order_id: str) -> str:
            """Look up an order's status."""
            recorder.probe("lookup_order")
            return fw.lookup_order(order_id)

        @agent.tool_plain
        def get_shipping(order_id: str) -> str:
            """Look up an order's shipping."""
            recorder.probe("get_shipping")
            return fw.get_shipping(order_id)

    specialist = Agent(FunctionModel(specialist_model, model_name="specialist-model"), name="specialist",
                       instructions="Answer order questions.")
    add_order_tools(specialist)

    agent = Agent(FunctionModel(scripted, model_name="scripted-model"), name="order_agent",
                  instructions="Look up orders.", retries=10)
    add_order_tools(agent)

    if args.scenario == "errors-raise":
        @agent.tool_plain
        def flaky_tool(x: int, mode: str) -> str:
            """A tool that always fails."""
            recorder.probe("flaky_tool")
            return fw.flaky(x, mode)
    else:
        @agent.tool_plain
        def flaky_tool(x: int, mode: str) -> str:
            """A tool that always fails."""
            recorder.probe("flaky_tool")
            raise ModelRetry(f"flaky_tool exploded on x={x}")

    @agent.tool
    async def ask_specialist(ctx: RunContext, question: str) -> str:
        """Ask the specialist agent."""
        recorder.probe("ask_specialist")
        r = await specialist.run(question, usage=ctx.usage)
        return r.output

    with common.Timer() as t_run:
        outcome, result = fw.run_guarded(lambda: asyncio.run(agent.run("Where is order A-1?")))
    final = getattr(result, "output", None)
    name = args.out or fw.out_name(f"pai_{'otel_genai' if args.instr == 'genai' else 'openinference'}__{args.scenario}", args.content)
    fw.finish(name, provider, exporter, recorder, scenario=args.scenario, turns=turns, expected=expected,
              versions=pkgs, outcome=outcome, final=final, t_import=t_import, t_run=t_run)


if __name__ == "__main__":
    main()
