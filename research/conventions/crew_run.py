"""CrewAI + OpenInference (wrappers, or its event-bus listener) or OpenLLMetry; a scripted BaseLLM
with native function calling, no network.

Usage: python crew_run.py --instr {openinference,openinference-events,traceloop} --scenario NAME [--out NAME]

--instr openinference:         CrewAIInstrumentor().instrument(tracer_provider=...)  (method wrappers, default)
--instr openinference-events:  CrewAIInstrumentor().instrument(tracer_provider=..., use_event_listener=True)
--instr traceloop:             opentelemetry.instrumentation.crewai.CrewAIInstrumentor (OpenLLMetry)

The LLM is a crewai.llms.base_llm.BaseLLM subclass whose supports_function_calling() is True: its
call() returns OpenAI-style tool calls ({"id", "type": "function", "function": {"name", "arguments"}})
and CrewAI's executor runs them (the native tool-calling path real providers take), or the final
answer as text.

No network: CREWAI_DISABLE_TELEMETRY / CREWAI_DISABLE_TRACKING / CREWAI_TRACING_ENABLED=false, and a
socket guard (fw_common) refuses and records any connection to a non-local address. OTEL_SDK_DISABLED is NOT
set: CrewAI reads it to silence its own telemetry, but the OTel SDK reads it too and our
TracerProvider would then record nothing.

Scenarios: fw_common.SCENARIOS (in `errors` flaky_tool raises; CrewAI hands the error text back to
the model and the run goes on), plus
  delegate     the agent has allow_delegation=True and a coworker "Specialist": it asks the coworker
               the same question 4 times (CrewAI's delegation tool); the coworker calls lookup_order(A-1)
               and answers each time
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.update({"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_DISABLE_TRACKING": "true",
                   "CREWAI_TRACING_ENABLED": "false", "OPENAI_API_KEY": "sk-dummy-no-network",
                   "CREWAI_STORAGE_DIR": "/tmp/crewai-research-storage"})

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import fw_common as fw  # noqa: E402

ASK = "ask_question_to_coworker"
EXTRA = {
    "delegate": ([[(f"c{i}", ASK, {"question": "status of A-1?", "context": "order A-1", "coworker": "Specialist"})]
                  for i in range(1, 5)] + ["done"],
                 {"tool_calls": 8, "errors": 0, "must": ["cycle/stop"], "quiet": False,
                  "note": "4 x (delegation tool, coworker's lookup_order): same 2-call pattern x4"}),
}


def serve_chat_completions(script) -> str:
    """A loopback HTTP server answering POST .../chat/completions with the script's next turn."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            i, step, (tin, tout) = script.next()
            if isinstance(step, str):
                msg, finish = {"role": "assistant", "content": step}, "stop"
            else:
                msg = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": c, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for c, n, a in step]}
                finish = "tool_calls"
            body = json.dumps({"id": f"chatcmpl-{i}", "object": "chat.completion", "created": 1700000000 + i,
                               "model": "gpt-4o-mini-2024-07-18",
                               "choices": [{"index": 0, "message": msg, "finish_reason": finish, "logprobs": None}],
                               "usage": {"prompt_tokens": tin, "completion_tokens": tout,
                                         "total_tokens": tin + tout}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["openinference", "openinference-events", "traceloop"])
    ap.add_argument("--scenario", required=True, choices=list(fw.SCENARIOS) + list(EXTRA))
    ap.add_argument("--model", default="scripted", choices=["scripted", "openai-local"],
                    help="openai-local: CrewAI's own LLM class (OpenAI provider) against a scripted "
                         "chat-completions server on 127.0.0.1 (the provider's real code path)")
    ap.add_argument("--content", default="default", choices=["default", "off"],
                    help="off: the instrumentation's content switch (fw_common.CONTENT_OFF_ENV)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.content == "off":
        fw.content_off("openinference" if args.instr.startswith("openinference") else "traceloop")
    turns, expected = EXTRA[args.scenario] if args.scenario in EXTRA else (
        fw.SCENARIOS[args.scenario], fw.EXPECTED[args.scenario])

    provider, exporter, recorder = fw.setup()
    with common.Timer() as t_import:
        from crewai import Agent, Crew, Process, Task
        from crewai.llms.base_llm import BaseLLM
        from crewai.tools import tool

    if args.instr.startswith("openinference"):
        from openinference.instrumentation.crewai import CrewAIInstrumentor

        CrewAIInstrumentor().instrument(tracer_provider=provider, use_event_listener=args.instr.endswith("events"))
        pkgs = ["openinference-instrumentation-crewai", "openinference-instrumentation",
                "openinference-semantic-conventions"]
    else:
        from opentelemetry.instrumentation.crewai import CrewAIInstrumentor

        CrewAIInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["opentelemetry-instrumentation-crewai", "opentelemetry-semantic-conventions-ai"]
    pkgs += ["crewai", "crewai-core"]

    script = fw.Script(turns)
    sub = {"n": 0}

    def tool_calls(step) -> list[dict]:
        return [{"id": c, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for c, n, a in step]

    class ScriptedLLM(BaseLLM):
        def supports_function_calling(self) -> bool:
            return True

        def call(self, messages, tools=None, callbacks=None, available_functions=None, from_task=None,
                 from_agent=None, response_model=None, **kw):
            i, step, (tin, tout) = script.next()
            self._emit_call_started_event(messages=messages, tools=tools, callbacks=callbacks,
                                          available_functions=available_functions, from_task=from_task,
                                          from_agent=from_agent)
            self._track_token_usage_internal({"prompt_tokens": tin, "completion_tokens": tout,
                                              "total_tokens": tin + tout})
            out = step if isinstance(step, str) else tool_calls(step)
            self._emit_call_completed_event(response=out, call_type=_call_type(out), from_task=from_task,
                                            from_agent=from_agent, messages=messages)
            return out

    class SpecialistLLM(BaseLLM):
        def supports_function_calling(self) -> bool:
            return True

        def call(self, messages, tools=None, callbacks=None, available_functions=None, from_task=None,
                 from_agent=None, response_model=None, **kw):
            answered = bool(messages) and isinstance(messages, list) and messages[-1].get("role") == "tool"
            if answered:
                return "A-1 is pending"
            sub["n"] += 1
            return tool_calls([(f"s{sub['n']}", "lookup_order", fw.A1)])

    def _call_type(out):
        from crewai.events.types.llm_events import LLMCallType

        return LLMCallType.LLM_CALL if isinstance(out, str) else LLMCallType.TOOL_CALL

    @tool("lookup_order")
    def lookup_order(order_id: str) -> str:
        """Look up an order's status."""
        recorder.probe("lookup_order")
        return fw.lookup_order(order_id)

    @tool("get_shipping")
    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping."""
        recorder.probe("get_shipping")
        return fw.get_shipping(order_id)

    @tool("flaky_tool")
    def flaky_tool(x: int, mode: str) -> str:
        """A tool that always fails."""
        recorder.probe("flaky_tool")
        return fw.flaky(x, mode)

    llm = ScriptedLLM(model="scripted-model")
    if args.model == "openai-local":
        from crewai import LLM

        base = serve_chat_completions(script)
        llm = LLM(model="openai/gpt-4o-mini", base_url=base, api_key="sk-dummy-no-network")
    agents = []
    agent = Agent(role="Order agent", goal="Answer where an order is", backstory="You look up orders.",
                  tools=[lookup_order, get_shipping, flaky_tool], llm=llm,
                  allow_delegation=args.scenario == "delegate", max_iter=25, verbose=False, cache=False)
    agents.append(agent)
    if args.scenario == "delegate":
        agents.append(Agent(role="Specialist", goal="Answer order questions", backstory="You know orders.",
                            tools=[lookup_order], llm=SpecialistLLM(model="specialist-model"), verbose=False,
                            cache=False))
    task = Task(description="Where is order A-1?", expected_output="The order's status.", agent=agent)
    crew = Crew(agents=agents, tasks=[task], process=Process.sequential, verbose=False)

    with common.Timer() as t_run:
        outcome, result = fw.run_guarded(crew.kickoff)
    final = getattr(result, "raw", None)
    base_name = f"crew_{args.instr.replace('-', '_')}__{args.scenario}"
    if args.model == "openai-local":
        base_name = f"crew_{args.instr.replace('-', '_')}__llm-openai__{args.scenario}"
    name = args.out or fw.out_name(base_name, args.content)
    fw.finish(name, provider, exporter, recorder, scenario=args.scenario, turns=turns, expected=expected,
              versions=pkgs, outcome=outcome, final=final, t_import=t_import, t_run=t_run)


if __name__ == "__main__":
    main()
