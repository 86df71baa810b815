"""One real CrewAI run with the guard as CrewAI's hooks (otel_loopguard.enforce.crewai).

Run with .venv-fw, never imported by pytest (test_enforce_wrappers.py runs it):

    .venv-fw/bin/python tests/frameworks/crew_enforce_agent.py SCENARIO OUT.pb [INSTRUMENTATION]

A scripted crewai BaseLLM with native function calling (as research/conventions/crew_run.py), no
network; the instrumentation (INSTRUMENTATIONS: OpenInference's method wrappers by default, its
event listener, or OpenLLMetry's), install() tagging the spans, the guard enforcing. Scenarios:
enforce_common.SCENARIOS. A request whose last message is the wrap-up instruction is answered
"wrap-up: <it>". Prints one JSON line (enforce_common.report).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.update({"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_DISABLE_TRACKING": "true",
                   "CREWAI_TRACING_ENABLED": "false", "TRACELOOP_TELEMETRY": "false",
                   "OPENAI_API_KEY": "sk-dummy-no-network",
                   "CREWAI_STORAGE_DIR": os.path.join(os.environ.get("TMPDIR", "/tmp"), "crewai-enforce-storage")})
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enforce_common as ec  # noqa: E402

INSTRUMENTATIONS = ("openinference", "openinference_events", "traceloop")


def _returns(messages: list) -> list:
    """The tool results since the model's last turn."""
    out = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        out.insert(0, str(m.get("content")))
    return out


def main(argv: list) -> int:
    scenario, out_path, instrumentation = ec.arguments(argv, "crew_enforce_agent.py", INSTRUMENTATIONS)
    provider, exporter, guard, invoked, requests = ec.setup(scenario, "frameworks-crew-key-7Tq2mZ0c")
    from crewai import Agent, Crew, Process, Task
    from crewai.llms.base_llm import BaseLLM
    from crewai.tools import tool

    from otel_loopguard.enforce.crewai import LoopguardHooks

    _instrument(instrumentation, provider)
    script = ec.script(scenario)

    class ScriptedLLM(BaseLLM):
        def supports_function_calling(self) -> bool:
            return True

        def call(self, messages, tools=None, callbacks=None, available_functions=None, from_task=None,
                 from_agent=None, response_model=None, **kw):
            last = messages[-1] if isinstance(messages, list) and messages else {}
            told = str(last.get("content")) if last.get("role") == "user" else ""
            carried = messages[:-1] if told == ec.WRAP_UP else messages  # the wrap-up follows the results
            requests.append({"tools": sorted(t["function"]["name"] for t in tools or []), "told": told,
                             "returns": _returns(carried)})
            if told == ec.WRAP_UP:
                return f"wrap-up: {told}"
            step = ec.step(script, requests)
            if isinstance(step, str):
                return step
            return [{"id": f"c{len(requests)}_{j}", "type": "function",
                     "function": {"name": n, "arguments": json.dumps(a)}} for j, (n, a) in enumerate(step)]

    @tool("lookup_order")
    def lookup_order(order_id: str) -> str:
        """Look up an order's status."""
        return ec.lookup_order(invoked, order_id)

    @tool("get_shipping")
    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping."""
        return ec.get_shipping(invoked, order_id)

    @tool("flaky_tool")
    def flaky_tool(x: int, mode: str) -> str:
        """A tool that always fails."""
        return ec.flaky_tool(invoked, x, mode)

    hooks = LoopguardHooks(guard).register()
    agent = Agent(role="Order agent", goal="Answer where an order is", backstory="You look up orders.",
                  tools=[lookup_order, get_shipping, flaky_tool], llm=ScriptedLLM(model="scripted-model"), max_iter=25,
                  verbose=False, cache=False)
    task = Task(description="Where is order A-1?", expected_output="The order's status.", agent=agent)
    try:
        final = str(Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=False).kickoff().raw)
    except Exception as exc:  # CrewAI's own stop of a run repeating a call (after the call ran)
        final = f"error: {type(exc).__name__}: {exc}"
    hooks.unregister()
    ec.report(provider, exporter, out_path, invoked, requests, final)
    return 0


def _instrument(instrumentation: str, provider) -> None:
    if instrumentation == "traceloop":
        from opentelemetry.instrumentation.crewai import CrewAIInstrumentor

        CrewAIInstrumentor().instrument(tracer_provider=provider)
    else:
        from openinference.instrumentation.crewai import CrewAIInstrumentor

        CrewAIInstrumentor().instrument(tracer_provider=provider, use_event_listener=instrumentation.endswith("events"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
