"""One real Pydantic AI run with the guard as a wrapper toolset (otel_loopguard.enforce.pydantic_ai).

Run with .venv-fw, never imported by pytest (test_enforce_adapters.py runs it):

    .venv-fw/bin/python tests/frameworks/pai_enforce_agent.py SCENARIO OUT.pb [builtin|openinference]

Scenarios (a FunctionModel, no network; Pydantic AI's own OTel instrumentation, with
OpenInference's span processor rewriting its spans for `openinference`, install() tagging the
spans, the guard enforcing): as adk_enforce_agent.py. A model request offered no tools (the
wrap-up) is answered "wrap-up: <its instructions' last line>". Prints one JSON line:
{"invoked", "requests": [{"tools", "told": the instructions' last line, "returns"}...], "final"}.
"""

# no `from __future__ import annotations`: Pydantic AI reads the tools' type hints at runtime

import asyncio
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enforce_common as ec  # noqa: E402

KEY = "frameworks-pai-key-4Nc8yB1e"
SCENARIOS = ("repeat", "healthy", "observe_tool", "kill_switch", "observe", "four")


def main(argv: list) -> int:
    scenario, out_path, instrumentation = ec.arguments(argv, "pai_enforce_agent.py", ("builtin", "openinference"),
                                                       SCENARIOS)
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from otel_loopguard.enforce.pydantic_ai import LoopguardToolset

    processors: tuple = ()
    if instrumentation == "openinference":  # it rewrites the built-in spans at their end, before the exporter
        from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor

        processors = (OpenInferenceSpanProcessor(),)
    provider, exporter, guard, invoked, requests = ec.setup(scenario, KEY, processors)
    script = ec.script(scenario)

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
        return ec.lookup_order(invoked, order_id)

    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping."""
        return ec.get_shipping(invoked, order_id)

    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    agent = Agent(FunctionModel(scripted, model_name="scripted-model"), name="order_agent",
                  instructions="Look up orders.",
                  toolsets=[LoopguardToolset(FunctionToolset([lookup_order, get_shipping]), guard=guard)])
    result = asyncio.run(agent.run("Where is order A-1?"))
    ec.report(provider, exporter, out_path, invoked, requests, str(result.output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
