"""One real Google ADK run with the guard as a runner plugin (otel_loopguard.enforce.adk).

Run with .venv-adk (google-adk pins opentelemetry <1.45), never imported by pytest
(test_enforce_adapters.py runs it):

    .venv-adk/bin/python tests/frameworks/adk_enforce_agent.py SCENARIO OUT.pb [builtin|openinference]

ADK's built-in spans, or OpenInference's GoogleADKInstrumentor (it replaces ADK's tracer).
Scenarios (a scripted model, no network; install() tags the spans, the guard enforces):
  repeat        lookup_order(A-1) in 8 model turns, then "done"
  healthy       lookup_order(A-1), get_shipping(A-1), lookup_order(B-2), then "done"
  observe_tool  as repeat, with a policy that makes lookup_order observe-only (enforce: false)
  kill_switch   as repeat, with otel_loopguard.set_mode("observe") before the run
  observe       as repeat, with an observe-only guard
  four          lookup_order(A-1) in 4 model turns, then "done" (nothing denied)

A model request without tools (the wrap-up) is answered "wrap-up: <what it was told>".
Writes the finished spans as OTLP protobuf to OUT.pb and prints one JSON line:
{"invoked": [[tool, args]...], "requests": [{"tools": [...], "told": the last user text,
"returns": [the tool results it carries]}...], "final": str}.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enforce_common as ec  # noqa: E402

KEY = "frameworks-adk-key-7Rt2pW0q"
SCENARIOS = ("repeat", "healthy", "observe_tool", "kill_switch", "observe", "four")


def _responses(contents: list[Any]) -> list[dict[str, Any]]:
    """The function responses of the request's last content that has any (the wrap-up's user
    turn comes after them)."""
    for content in reversed(contents):
        found = [dict(p.function_response.response or {}) for p in (content.parts or []) if p.function_response]
        if found:
            return found
    return []


def main(argv: list[str]) -> int:
    scenario, out_path, instrumentation = ec.arguments(argv, "adk_enforce_agent.py", ("builtin", "openinference"),
                                                       SCENARIOS)
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_loopguard

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # before ADK's import: it takes its tracer then
    otel_loopguard.install(tracer_provider=provider, key=KEY)

    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from otel_loopguard.enforce.adk import LoopguardPlugin

    if instrumentation == "openinference":
        from openinference.instrumentation.google_adk import GoogleADKInstrumentor

        GoogleADKInstrumentor().instrument(tracer_provider=provider)

    script = ec.script(scenario)
    requests: list[dict[str, Any]] = []
    invoked: list[tuple[str, dict[str, Any]]] = []

    class ScriptedLlm(BaseLlm):
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            last = llm_request.contents[-1] if llm_request.contents else None
            parts = (last.parts or []) if last is not None else []
            requests.append({
                "tools": sorted(llm_request.tools_dict),
                "last_user": next((p.text for p in parts if p.text), "") if last is not None and last.role == "user" else "",
                "returns": [str(r.get("result", r)) for r in _responses(llm_request.contents)],
            })
            requests[-1]["told"] = requests[-1]["last_user"]
            if not llm_request.tools_dict:
                out = [types.Part(text=f"wrap-up: {requests[-1]['told']}")]
            else:
                step = script[min(sum(1 for r in requests if r["tools"]) - 1, len(script) - 1)]
                out = ([types.Part(text=step)] if isinstance(step, str) else
                       [types.Part(function_call=types.FunctionCall(id=f"c{len(requests)}_{j}", name=n, args=a))
                        for j, (n, a) in enumerate(step)])
            yield LlmResponse(content=types.Content(role="model", parts=out))

    def lookup_order(order_id: str) -> str:
        """Look up an order's status."""
        return ec.lookup_order(invoked, order_id)

    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping."""
        return ec.get_shipping(invoked, order_id)

    guard = ec.scenario_guard(scenario, KEY)
    agent = LlmAgent(name="order_agent", model=ScriptedLlm(model="scripted-model"), instruction="Look up orders.",
                     tools=[lookup_order, get_shipping])
    runner = InMemoryRunner(agent=agent, app_name="loopguard_adk", plugins=[LoopguardPlugin(guard)])

    async def run() -> str:
        session = await runner.session_service.create_session(app_name="loopguard_adk", user_id="u1")
        final = ""
        message = types.Content(role="user", parts=[types.Part(text="Where is order A-1?")])
        async for ev in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            if ev.content and ev.content.parts and ev.content.parts[0].text:
                final = ev.content.parts[0].text
        return final

    final = asyncio.run(run())
    ec.report(provider, exporter, out_path, invoked, requests, final)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
