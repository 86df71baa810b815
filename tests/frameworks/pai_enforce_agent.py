"""One real Pydantic AI run with the guard as a wrapper toolset (otel_loopguard.enforce.pydantic_ai).

Run with .venv-fw, never imported by pytest (test_pydantic_ai_enforce.py runs it):

    .venv-fw/bin/python tests/frameworks/pai_enforce_agent.py SCENARIO OUT.pb

Scenarios (a FunctionModel, no network; Pydantic AI's own OTel instrumentation, install()
tagging the spans, the guard enforcing): as adk_enforce_agent.py (repeat, healthy,
observe_tool, kill_switch). A model request offered no tools (the wrap-up) is answered
"wrap-up: <its instructions' last line>". Prints one JSON line: {"invoked", "requests":
[{"tools", "told": the instructions' last line, "returns"}...], "final"}.
"""

# no `from __future__ import annotations`: Pydantic AI reads the tools' type hints at runtime

import asyncio
import json
import os
import sys
import tempfile
from typing import Any

KEY = "frameworks-pai-key-4Nc8yB1e"
SCENARIOS = ("repeat", "healthy", "observe_tool", "kill_switch")
A1, B2 = {"order_id": "A-1"}, {"order_id": "B-2"}


def _script(scenario: str) -> list:
    if scenario == "healthy":
        return [[("lookup_order", A1)], [("get_shipping", A1)], [("lookup_order", B2)], "done"]
    return [[("lookup_order", A1)] for _ in range(8)] + ["done"]


def main(argv: list) -> int:
    if len(argv) != 2 or argv[0] not in SCENARIOS:
        print(f"usage: pai_enforce_agent.py {{{','.join(SCENARIOS)}}} OUT.pb", file=sys.stderr)
        return 2
    scenario, out_path = argv
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    import otel_loopguard
    from otel_loopguard.enforce.pydantic_ai import LoopguardToolset

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel_loopguard.install(tracer_provider=provider, key=KEY)
    script = _script(scenario)
    requests: list = []
    invoked: list = []

    def scripted(messages: list, info: AgentInfo) -> ModelResponse:
        returns = [str(p.content) for p in getattr(messages[-1], "parts", []) if isinstance(p, ToolReturnPart)]
        instructions = getattr(messages[-1], "instructions", None) or ""
        told = instructions.splitlines()[-1] if instructions else ""
        requests.append({"tools": sorted(t.name for t in info.function_tools), "told": told, "returns": returns})
        if not info.function_tools:
            return ModelResponse(parts=[TextPart(f"wrap-up: {told}")])
        step = script[min(sum(1 for r in requests if r["tools"]) - 1, len(script) - 1)]
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=f"c{len(requests)}_{j}")
                                    for j, (n, a) in enumerate(step)])

    def lookup_order(order_id: str) -> str:
        """Look up an order's status."""
        invoked.append(("lookup_order", {"order_id": order_id}))
        return f"order {order_id}: pending"

    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping."""
        invoked.append(("get_shipping", {"order_id": order_id}))
        return f"order {order_id}: ships tomorrow"

    policy = None
    if scenario == "observe_tool":
        policy = os.path.join(tempfile.mkdtemp(), "policy.yaml")
        with open(policy, "w") as f:
            f.write("tools: {lookup_order: {enforce: false}}\n")
    guard = otel_loopguard.guard(key=KEY, policy=policy, mode="enforce")
    if scenario == "kill_switch":
        otel_loopguard.set_mode("observe")
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    agent = Agent(FunctionModel(scripted, model_name="scripted-model"), name="order_agent",
                  instructions="Look up orders.",
                  toolsets=[LoopguardToolset(FunctionToolset([lookup_order, get_shipping]), guard=guard)])
    result = asyncio.run(agent.run("Where is order A-1?"))
    provider.force_flush()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    with open(out_path, "wb") as f:
        f.write(encode_spans(spans).SerializeToString())
    print(json.dumps({"invoked": invoked, "requests": requests, "final": str(result.output)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
