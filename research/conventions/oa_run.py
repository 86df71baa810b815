"""OpenAI Agents SDK + an OTel bridge instrumentation, scripted model, no network.

Usage: python oa_run.py --instr {openinference,genai,traceloop} --model {scripted,chatcompletions,responses}
                        [--content {default,instr-off,sdk-off}] [--out NAME]

Scenario (same for every combo):
  turns 1-3: lookup_order({"order_id": "A-1"})               (same tool, same args, 3 turns)
  turn 4:    lookup_order({"order_id": "A-1"}) x2 in parallel (one model response, 2 calls)
  turn 5:    flaky_tool({"x": 1, "mode": "fast"}) which raises RuntimeError
  turn 6:    final answer "done"

Model modes:
  scripted        - our own agents.models.interface.Model subclass; wraps each call in
                    agents.tracing.generation_span exactly like the SDK's own chat-completions model
  chatcompletions - the SDK's real OpenAIChatCompletionsModel over an httpx.MockTransport
  responses       - the SDK's real OpenAIResponsesModel (the SDK default) over an httpx.MockTransport
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-no-network")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SCRIPT: list[list[tuple[str, str, dict]] | str] = [
    [("call_t1", "lookup_order", {"order_id": "A-1"})],
    [("call_t2", "lookup_order", {"order_id": "A-1"})],
    [("call_t3", "lookup_order", {"order_id": "A-1"})],
    [("call_t4a", "lookup_order", {"order_id": "A-1"}), ("call_t4b", "lookup_order", {"order_id": "A-1"})],
    [("call_t5", "flaky_tool", {"x": 1, "mode": "fast"})],
    "done",
]
USAGE = [(100 + 10 * i, 7 + i) for i in range(len(SCRIPT))]  # (input, output) per turn


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["openinference", "genai", "traceloop"])
    ap.add_argument("--model", default="scripted", choices=["scripted", "chatcompletions", "responses"])
    ap.add_argument("--content", default="default", choices=["default", "instr-off", "sdk-off"])
    ap.add_argument("--error", default="default", choices=["default", "raise"],
                    help="default: SDK's default failure_error_function turns the exception into a tool "
                         "result for the model; raise: failure_error_function=None, the run aborts")
    ap.add_argument("--out", default=None)
    return ap.parse_args()


CONTENT_OFF_ENV = {
    # instrumentation-level switches (set before the instrumentor is created)
    "openinference": {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"},
    "genai": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"},
    "traceloop": {"TRACELOOP_TRACE_CONTENT": "false"},
}


def main() -> None:
    args = parse()
    if args.content == "instr-off":
        os.environ.update(CONTENT_OFF_ENV[args.instr])
    if args.content == "sdk-off":
        os.environ["OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA"] = "false"

    with common.Timer() as t_import:
        try:  # openai>=3 is built on httpx2 (same API as httpx)
            import httpx2 as httpx
        except ImportError:  # pragma: no cover
            import httpx
        from agents import Agent, ModelSettings, RunConfig, Runner, function_tool, set_trace_processors
        from agents.items import ModelResponse
        from agents.models.interface import Model
        from agents.tracing import generation_span
        from agents.usage import Usage
        from openai import AsyncOpenAI
        from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    provider, exporter, recorder = common.setup()
    # No export to OpenAI: drop the SDK's default (backend) trace processor BEFORE the
    # instrumentor adds its own. (set_tracing_disabled(True) would also silence the bridge.)
    set_trace_processors([])

    if args.instr == "openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["openinference-instrumentation-openai-agents", "openinference-instrumentation",
                "openinference-semantic-conventions"]
    elif args.instr == "genai":
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["opentelemetry-instrumentation-openai-agents-v2", "opentelemetry-util-genai"]
    else:
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        pkgs = ["opentelemetry-instrumentation-openai-agents", "opentelemetry-semantic-conventions-ai"]

    @function_tool
    def lookup_order(order_id: str) -> str:
        """Look up an order's status."""
        recorder.probe("lookup_order")
        return f"order {order_id}: pending"

    @function_tool(**({"failure_error_function": None} if args.error == "raise" else {}))
    def flaky_tool(x: int, mode: str) -> str:
        """A tool that always fails."""
        recorder.probe("flaky_tool")
        raise RuntimeError(f"flaky_tool exploded on x={x}")

    turn = {"i": 0}

    def next_step():
        i = turn["i"]
        turn["i"] += 1
        return i, SCRIPT[i], USAGE[i]

    # ---- scripted Model ----------------------------------------------------------------
    class ScriptedModel(Model):
        async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                               handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                               prompt=None, **kw):
            with generation_span(model="scripted-model", model_config={"temperature": 0},
                                 disabled=tracing.is_disabled()) as g:
                i, step, (tin, tout) = next_step()
                if tracing.include_data():
                    g.span_data.input = [{"role": "system", "content": system_instructions}] + (
                        [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
                    )
                if isinstance(step, str):
                    out = [ResponseOutputMessage(id=f"msg_{i}", type="message", role="assistant", status="completed",
                                                 content=[ResponseOutputText(type="output_text", text=step,
                                                                             annotations=[])])]
                    chat_out = [{"role": "assistant", "content": step}]
                else:
                    out = [ResponseFunctionToolCall(type="function_call", id=f"fc_{cid}", call_id=cid, name=name,
                                                    arguments=json.dumps(a), status="completed")
                           for cid, name, a in step]
                    chat_out = [{"role": "assistant", "content": None, "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
                        for cid, name, a in step]}]
                if tracing.include_data():
                    g.span_data.output = chat_out
                g.span_data.usage = {"requests": 1, "input_tokens": tin, "output_tokens": tout,
                                     "total_tokens": tin + tout}
                return ModelResponse(output=out, usage=Usage(requests=1, input_tokens=tin, output_tokens=tout,
                                                             total_tokens=tin + tout),
                                     response_id=f"resp_{i}")

        def stream_response(self, *a, **kw):  # pragma: no cover - not used (Runner.run)
            raise NotImplementedError

    # ---- real SDK models over a mock HTTP transport ---------------------------------------
    def handler(request: httpx.Request) -> httpx.Response:
        i, step, (tin, tout) = next_step()
        if request.url.path.endswith("/chat/completions"):
            if isinstance(step, str):
                msg, finish = {"role": "assistant", "content": step}, "stop"
            else:
                msg = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
                    for cid, name, a in step]}
                finish = "tool_calls"
            body = {"id": f"chatcmpl-{i}", "object": "chat.completion", "created": 1700000000 + i,
                    "model": "gpt-4o-mini-2024-07-18",
                    "choices": [{"index": 0, "message": msg, "finish_reason": finish, "logprobs": None}],
                    "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}}
        elif request.url.path.endswith("/responses"):
            if isinstance(step, str):
                output = [{"type": "message", "id": f"msg_{i}", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": step, "annotations": []}]}]
            else:
                output = [{"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": name,
                           "arguments": json.dumps(a), "status": "completed"} for cid, name, a in step]
            body = {"id": f"resp_{i}", "object": "response", "created_at": 1700000000 + i, "status": "completed",
                    "model": "gpt-4o-mini-2024-07-18", "output": output, "parallel_tool_calls": True,
                    "tool_choice": "auto", "tools": [], "temperature": 1.0, "top_p": 1.0, "error": None,
                    "incomplete_details": None, "instructions": None, "metadata": {},
                    "usage": {"input_tokens": tin, "output_tokens": tout, "total_tokens": tin + tout,
                              "input_tokens_details": {"cached_tokens": 0},
                              "output_tokens_details": {"reasoning_tokens": 0}}}
        else:
            return httpx.Response(404, json={"error": {"message": f"unexpected {request.url.path}"}})
        return httpx.Response(200, json=body, headers={"x-request-id": f"req_{i}"})

    if args.model == "scripted":
        model = ScriptedModel()
    else:
        from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel

        client = AsyncOpenAI(api_key="sk-dummy", base_url="http://mock.invalid/v1",
                             http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)), max_retries=0)
        cls = OpenAIChatCompletionsModel if args.model == "chatcompletions" else OpenAIResponsesModel
        model = cls(model="gpt-4o-mini", openai_client=client)

    agent = Agent(name="Order agent", instructions="Look up orders.", tools=[lookup_order, flaky_tool], model=model,
                  model_settings=ModelSettings(parallel_tool_calls=True))

    async def run():
        return await Runner.run(agent, "Where is order A-1?", max_turns=20,
                                run_config=RunConfig(workflow_name="loop-research"))

    outcome = "ok"
    with common.Timer() as t_run:
        try:
            result = asyncio.run(run())
            final = str(result.final_output)
        except Exception as e:  # --error raise
            outcome, final = f"raised {type(e).__name__}: {e}", None
    provider.force_flush()

    combo = {"openinference": "oa_openinference", "genai": "oa_otel_genai", "traceloop": "oa_traceloop"}[args.instr]
    name = args.out or f"{combo}__{args.model}" + ("" if args.content == "default" else f"__{args.content}") + (
        "" if args.error == "default" else f"__error-{args.error}")
    meta = {
        "combo": combo, "model_mode": args.model, "content": args.content,
        "env": {k: v for k, v in os.environ.items()
                if k.startswith(("OPENINFERENCE_", "OTEL_INSTRUMENTATION", "TRACELOOP_", "OPENAI_AGENTS_"))},
        "python": common.python_version(),
        "versions": common.versions(["openai-agents", "openai", "opentelemetry-sdk", "opentelemetry-api"] + pkgs),
        "final_output": final, "outcome": outcome, "error_style": args.error,
        "import_seconds": t_import.seconds, "run_seconds": t_run.seconds,
        "script": [s if isinstance(s, str) else [[c, n, a] for c, n, a in s] for s in SCRIPT],
    }
    rows = common.dump(os.path.join(common.CAPTURES, name + ".json"), exporter, recorder, meta)
    print(f"{name}: {len(rows)} spans, run {t_run.seconds}s, final={final!r}, outcome={outcome}")
    tree = common.tree(rows)
    with open(os.path.join(common.CAPTURES, name + ".tree.txt"), "w") as f:
        f.write(tree + "\n")
    print(tree)


if __name__ == "__main__":
    main()
