"""Google ADK + its built-in OTel spans, or OpenInference's GoogleADKInstrumentor; a scripted
BaseLlm, InMemoryRunner, no network.

Usage: python adk_run.py --instr {builtin,builtin-content,openinference} --scenario NAME [--out NAME]

--instr builtin:          ADK's own spans (tracer "gcp.vertex.agent") on the global TracerProvider;
                          defaults (ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS on)
--instr builtin-content:  the same with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY, the
                          switch that puts tool arguments/results and messages on ADK's spans (off by
                          default). OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental was tried on
                          top and changed no attribute of any span.
--instr openinference:    GoogleADKInstrumentor().instrument(tracer_provider=...) (it replaces ADK's tracer)

Scenarios: fw_common.SCENARIOS (in `errors` flaky_tool raises and the agent's on_tool_error_callback
turns the exception into {"error": ...} for the model, the documented ADK way to keep the run going), plus
  errors-raise       no callback: the exception ends the run
  handoff-pingpong   triage <-> billing by ADK's transfer_to_agent (sub_agents), 6 transfers, then "done"
  handoff-single     one transfer triage -> billing, which answers
  delegate           AgentTool: the orchestrator calls the specialist agent as a tool 4 times with the
                     same request; the specialist calls lookup_order(A-1) and answers each time
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

os.environ.setdefault("GOOGLE_API_KEY", "dummy-no-network")
os.environ.setdefault("GOOGLE_GENAI_USE_VERTEXAI", "false")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import fw_common as fw  # noqa: E402

T = "transfer_to_agent"
EXTRA = {
    "errors-raise": ([[("c1", "flaky_tool", fw.BAD)], "done"],
                     {"tool_calls": 1, "errors": 1, "must": [], "quiet": True,
                      "note": "the run aborts at the first raise; 1 failed call is no loop"}),
    "handoff-pingpong": ([[(f"h{i}", T, {"agent_name": "billing" if i % 2 else "triage"})] for i in range(1, 7)]
                         + ["done"],
                         {"tool_calls": 6, "errors": 0, "must": ["cycle/stop"], "quiet": False,
                          "note": "6 transfers triage<->billing: a handoff ping-pong"}),
    "handoff-single": ([[("h1", T, {"agent_name": "billing"})], "done"],
                       {"tool_calls": 1, "errors": 0, "must": [], "quiet": True}),
    "delegate": ([[(f"c{i}", "specialist", {"request": "status of A-1?"})] for i in range(1, 5)] + ["done"],
                 {"tool_calls": 8, "errors": 0, "must": ["cycle/stop"], "quiet": False,
                  "note": "4 AgentTool delegations x (specialist, sub-agent lookup_order): same 2-call pattern x4"}),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["builtin", "builtin-content", "openinference"])
    ap.add_argument("--scenario", required=True, choices=list(fw.SCENARIOS) + list(EXTRA))
    ap.add_argument("--content", default="default", choices=["default", "off"],
                    help="off: the instrumentation's content switch (fw_common.CONTENT_OFF_ENV)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.content == "off":
        fw.content_off("openinference" if args.instr == "openinference" else "")
    turns, expected = EXTRA[args.scenario] if args.scenario in EXTRA else (
        fw.SCENARIOS[args.scenario], fw.EXPECTED[args.scenario])
    if args.instr == "builtin-content":
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"

    provider, exporter, recorder = fw.setup()  # global provider first: ADK takes its tracer at import
    with common.Timer() as t_import:
        from google.adk.agents import LlmAgent
        from google.adk.models.base_llm import BaseLlm
        from google.adk.models.llm_response import LlmResponse
        from google.adk.runners import InMemoryRunner
        from google.adk.tools.agent_tool import AgentTool
        from google.genai import types

    pkgs = ["google-adk", "google-genai"]
    if args.instr == "openinference":
        from openinference.instrumentation.google_adk import GoogleADKInstrumentor

        GoogleADKInstrumentor().instrument(tracer_provider=provider)
        pkgs += ["openinference-instrumentation-google-adk", "openinference-instrumentation",
                 "openinference-semantic-conventions"]

    script = fw.Script(turns)
    sub_ids = {"n": 0}

    def response(step, tin, tout) -> "LlmResponse":
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=tin, candidates_token_count=tout,
                                                           total_token_count=tin + tout)
        if isinstance(step, str):
            parts = [types.Part(text=step)]
        else:
            parts = [types.Part(function_call=types.FunctionCall(id=c, name=n, args=a)) for c, n, a in step]
        return LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage,
                           model_version="scripted-model")

    class ScriptedLlm(BaseLlm):
        async def generate_content_async(self, llm_request, stream: bool = False):
            i, step, (tin, tout) = script.next()
            yield response(step, tin, tout)

    class SpecialistLlm(BaseLlm):
        """Calls lookup_order(A-1) unless the request already holds its answer, then answers."""

        async def generate_content_async(self, llm_request, stream: bool = False):
            last = llm_request.contents[-1] if llm_request.contents else None
            answered = bool(last and any(p.function_response for p in (last.parts or [])))
            if answered:
                yield response("A-1 is pending", 50, 5)
            else:
                sub_ids["n"] += 1
                yield response([(f"s{sub_ids['n']}", "lookup_order", fw.A1)], 50, 5)

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

    def on_tool_error(tool, args, tool_context, error):
        return {"error": f"{type(error).__name__}: {error}"}

    model = ScriptedLlm(model="scripted-model")
    cb = {} if args.scenario == "errors-raise" else {"on_tool_error_callback": on_tool_error}
    if args.scenario.startswith("handoff"):
        billing = LlmAgent(name="billing", model=model, instruction="Billing questions.",
                           tools=[lookup_order], description="Handles billing.")
        root = LlmAgent(name="triage", model=model, instruction="Route the user.", tools=[lookup_order],
                        sub_agents=[billing], description="Routes requests.")
    else:
        tools = [lookup_order, get_shipping, flaky_tool]
        if args.scenario == "delegate":
            specialist = LlmAgent(name="specialist", model=SpecialistLlm(model="specialist-model"),
                                  instruction="Answer order questions.", tools=[lookup_order],
                                  description="Answers order questions.")
            tools.append(AgentTool(agent=specialist))
        root = LlmAgent(name="order_agent", model=model, instruction="Look up orders.", tools=tools, **cb)

    runner = InMemoryRunner(agent=root, app_name="loop_research")

    async def run():
        session = await runner.session_service.create_session(app_name="loop_research", user_id="u1")
        final = None
        async for ev in runner.run_async(user_id="u1", session_id=session.id,
                                         new_message=types.Content(role="user",
                                                                   parts=[types.Part(text="Where is order A-1?")])):
            if ev.content and ev.content.parts and ev.content.parts[0].text:
                final = ev.content.parts[0].text
        return final

    with common.Timer() as t_run:
        outcome, final = fw.run_guarded(lambda: asyncio.run(run()))
    combo = {"builtin": "adk_builtin", "builtin-content": "adk_builtin_content", "openinference": "adk_openinference"}
    name = args.out or fw.out_name(f"{combo[args.instr]}__{args.scenario}", args.content)
    fw.finish(name, provider, exporter, recorder, scenario=args.scenario, turns=turns, expected=expected,
              versions=pkgs, outcome=outcome, final=final, t_import=t_import, t_run=t_run)


if __name__ == "__main__":
    main()
