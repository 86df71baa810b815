"""A handoff ping-pong under the OTel-contrib GenAI instrumentation (v2) and install().

Run with the second virtualenv, never imported by pytest (test_genai_contrib_handoffs.py runs it):

    .venv-genai/bin/python tests/frameworks/genai_contrib_handoffs.py HANDOFFS

TriageAgent and BillingAgent hand the run to each other HANDOFFS times (a scripted model calls
the SDK's `transfer_to_<agent>` tools, no network), then answer. Prints one JSON line per span
the processor tagged, in start order: {"seq", "tool", "digest", "decisions": [[kind, severity], ...]}.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

KEY = "frameworks-test-key-Zq81Lm3v"  # the same digest key as agents_helpers.KEY


def main(handoffs: int) -> None:
    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-no-network")
    from agents import Agent, RunConfig, Runner, set_trace_processors
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.tracing import generation_span
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_loopguard

    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel_loopguard.install(tracer_provider=provider, key=KEY)
    set_trace_processors([])  # no export to OpenAI
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    script: list[Any] = ["BillingAgent", "TriageAgent"] * (handoffs // 2) + ["BillingAgent"] * (handoffs % 2) + [None]

    class ScriptedModel(Model):
        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                               output_schema: Any, handoffs: Any, tracing: Any, **_: Any) -> ModelResponse:
            with generation_span(model="scripted-model", disabled=tracing.is_disabled()):
                target = script.pop(0)
                usage = Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
                if target is None:
                    text = ResponseOutputText(type="output_text", text="done", annotations=[])
                    out: list[Any] = [ResponseOutputMessage(id="msg", type="message", role="assistant",
                                                            status="completed", content=[text])]
                else:
                    h = next(h for h in handoffs if h.agent_name == target)
                    out = [ResponseFunctionToolCall(type="function_call", id=f"fc_{len(script)}",
                                                    call_id=f"call_{len(script)}", name=h.tool_name,
                                                    arguments="{}", status="completed")]
                return ModelResponse(output=out, usage=usage, response_id="resp")

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    model = ScriptedModel()
    triage, billing = Agent(name="TriageAgent", model=model), Agent(name="BillingAgent", model=model)
    triage.handoffs, billing.handoffs = [billing], [triage]
    asyncio.run(Runner.run(triage, "My invoice is wrong.", max_turns=30,
                           run_config=RunConfig(workflow_name="loopguard-handoffs")))
    provider.force_flush()
    for span in sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0):
        a = span.attributes or {}
        if "loopguard.seq" in a:
            decisions = [[e.attributes.get("loopguard.finding.kind"), e.attributes.get("loopguard.finding.severity")]
                         for e in span.events if e.name == "loopguard.decision" and e.attributes]
            print(json.dumps({"seq": a["loopguard.seq"], "tool": a["loopguard.tool.name"],
                              "digest": a["loopguard.args.digest"], "decisions": decisions}))


if __name__ == "__main__":
    main(int(sys.argv[1]))
