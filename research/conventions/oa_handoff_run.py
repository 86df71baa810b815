"""OpenAI Agents SDK handoffs + an OTel bridge instrumentation, scripted model, no network.

Usage: python oa_handoff_run.py --instr {openinference,genai,traceloop} --scenario {pingpong,single,supervisor}
                                [--out NAME]

Scenarios (the scripted model answers each turn from a fixed list; no tool work at all):
  pingpong    TriageAgent and BillingAgent hand the run to each other 8 times, then "done"
  single      TriageAgent hands to BillingAgent once, BillingAgent answers "done"
  supervisor  Supervisor routes to BillingAgent, back to Supervisor, to ShippingAgent, back,
              to RefundAgent, which answers "done" (several different agents: no loop)

The model hands off the way a real one does: a function call of the handoff's tool
(`transfer_to_<agent>`), which the SDK turns into a handoff span.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-no-network")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# Per scenario: the agent names, each agent's handoff targets, and the script of targets
# (None: the final answer).
SCENARIOS: dict[str, dict] = {
    "pingpong": {
        "agents": {"TriageAgent": ["BillingAgent"], "BillingAgent": ["TriageAgent"]},
        "start": "TriageAgent",
        "script": ["BillingAgent", "TriageAgent"] * 4 + [None],
    },
    "single": {
        "agents": {"TriageAgent": ["BillingAgent"], "BillingAgent": []},
        "start": "TriageAgent",
        "script": ["BillingAgent", None],
    },
    "supervisor": {
        "agents": {"Supervisor": ["BillingAgent", "ShippingAgent", "RefundAgent"], "BillingAgent": ["Supervisor"],
                   "ShippingAgent": ["Supervisor"], "RefundAgent": []},
        "start": "Supervisor",
        "script": ["BillingAgent", "Supervisor", "ShippingAgent", "Supervisor", "RefundAgent", None],
    },
}


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["openinference", "genai", "traceloop"])
    ap.add_argument("--scenario", default="pingpong", choices=sorted(SCENARIOS))
    ap.add_argument("--out", default=None)
    return ap.parse_args()


def instrument(instr: str, provider) -> list[str]:
    if instr == "openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        return ["openinference-instrumentation-openai-agents", "openinference-instrumentation"]
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    if instr == "genai":
        return ["opentelemetry-instrumentation-openai-agents-v2", "opentelemetry-util-genai"]
    return ["opentelemetry-instrumentation-openai-agents", "opentelemetry-semantic-conventions-ai"]


def main() -> None:
    args = parse()
    scenario = SCENARIOS[args.scenario]
    from agents import Agent, RunConfig, Runner, set_trace_processors
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.tracing import generation_span
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    provider, exporter, recorder = common.setup()
    set_trace_processors([])  # no export to OpenAI (oa_run.py)
    pkgs = instrument(args.instr, provider)
    turn = {"i": 0}

    class ScriptedModel(Model):
        async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                               handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                               prompt=None, **kw):
            with generation_span(model="scripted-model", disabled=tracing.is_disabled()) as g:
                i = turn["i"]
                turn["i"] += 1
                target = scenario["script"][i]
                usage = Usage(requests=1, input_tokens=100 + 10 * i, output_tokens=7 + i,
                              total_tokens=107 + 11 * i)
                g.span_data.usage = {"requests": 1, "input_tokens": usage.input_tokens,
                                     "output_tokens": usage.output_tokens, "total_tokens": usage.total_tokens}
                if target is None:
                    out = [ResponseOutputMessage(id=f"msg_{i}", type="message", role="assistant", status="completed",
                                                 content=[ResponseOutputText(type="output_text", text="done",
                                                                             annotations=[])])]
                    g.span_data.output = [{"role": "assistant", "content": "done"}]
                else:
                    h = next(h for h in handoffs if h.agent_name == target)
                    out = [ResponseFunctionToolCall(type="function_call", id=f"fc_h{i}", call_id=f"call_h{i}",
                                                    name=h.tool_name, arguments="{}", status="completed")]
                    g.span_data.output = [{"role": "assistant", "tool_calls": [
                        {"id": f"call_h{i}", "type": "function", "function": {"name": h.tool_name,
                                                                               "arguments": "{}"}}]}]
                return ModelResponse(output=out, usage=usage, response_id=f"resp_{i}")

        def stream_response(self, *a, **kw):  # pragma: no cover - not used (Runner.run)
            raise NotImplementedError

    model = ScriptedModel()
    agents = {name: Agent(name=name, instructions=f"You are {name}.", model=model) for name in scenario["agents"]}
    for name, targets in scenario["agents"].items():
        agents[name].handoffs = [agents[t] for t in targets]

    async def run():
        return await Runner.run(agents[scenario["start"]], "My invoice is wrong.", max_turns=30,
                                run_config=RunConfig(workflow_name="handoff-research"))

    with common.Timer() as t_run:
        result = asyncio.run(run())
    provider.force_flush()

    combo = {"openinference": "oa_openinference", "genai": "oa_otel_genai", "traceloop": "oa_traceloop"}[args.instr]
    name = args.out or f"{combo}__handoff_{args.scenario}"
    meta = {
        "combo": combo, "scenario": args.scenario, "python": common.python_version(),
        "versions": common.versions(["openai-agents", "openai", "opentelemetry-sdk", "opentelemetry-api"] + pkgs),
        "final_output": str(result.final_output), "last_agent": result.last_agent.name,
        "run_seconds": t_run.seconds, "script": scenario["script"], "agents": scenario["agents"],
    }
    folder = os.path.join(common.CAPTURES, "handoffs")  # apart: tests that read every capture expect tool calls
    rows = common.dump(os.path.join(folder, name + ".json"), exporter, recorder, meta)
    print(f"{name}: {len(rows)} spans, run {t_run.seconds}s, final={result.final_output!r}")
    tree = common.tree(rows)
    with open(os.path.join(folder, name + ".tree.txt"), "w") as f:
        f.write(tree + "\n")
    print(tree)


if __name__ == "__main__":
    main()
