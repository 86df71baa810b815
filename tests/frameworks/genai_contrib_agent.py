"""One real OpenAI Agents SDK run under the OTel-contrib GenAI instrumentation (v2).

Run with the second virtualenv, never imported by pytest (test_genai_contrib.py runs it):

    .venv-genai/bin/python tests/frameworks/genai_contrib_agent.py {observe,enforce,pagination} OUT.pb

`opentelemetry-instrumentation-openai-agents-v2` installs the same module files as
OpenLLMetry's instrumentation, so it cannot live in the main virtualenv (pyproject,
extra `genai_contrib`). This script builds what an application would have: an SDK
TracerProvider with an in-memory exporter, `otel_loopguard.install()` in front of it,
the v2 instrumentor, and a scripted model (no network, no key).

Scenarios:
  observe     lookup_order(A12) x8, then "done"; no guard (install() tags and judges only)
  enforce     the same, with guard_agent(otel_loopguard.guard(key=...), agent)
  pagination  search_cases with a new cursor each time x8, then "done", guarded (negative control)

Writes the finished spans as a serialized OTLP ExportTraceServiceRequest to OUT.pb and
prints one JSON line: {"invoked": [[tool, args], ...], "final_output", "requests",
"tool_outputs"}.

The scripted model is a small copy of agents_helpers.ScriptedModel: that module imports
pytest, which this virtualenv does not have.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Optional, Sequence, Union

KEY = "frameworks-test-key-Zq81Lm3v"  # the same digest key as agents_helpers.KEY
SCENARIOS = ("observe", "enforce", "pagination")

Call = tuple[str, dict[str, Any]]
Turn = Union[Sequence[Call], str]


def _script(scenario: str) -> list[Turn]:
    if scenario == "pagination":
        pages = [[("search_cases", {"query": "refund", "cursor": None if p == 0 else f"p-{p}"})] for p in range(8)]
        return [*pages, "done"]
    return [[("lookup_order", {"order_id": "A12"})] for _ in range(8)] + ["done"]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in SCENARIOS:
        print(f"usage: genai_contrib_agent.py {{{','.join(SCENARIOS)}}} OUT.pb", file=sys.stderr)
        return 2
    scenario, out_path = argv
    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-no-network")

    from agents import Agent, ModelSettings, RunConfig, Runner, function_tool, set_trace_processors
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.tracing import generation_span
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_loopguard

    class ScriptedModel(Model):
        """Answers from the script, inside a generation span as the SDK's own models do.
        No span_data.input: the v2 instrumentation then calls the span `text_completion`."""

        def __init__(self, script: Sequence[Turn]):
            self.script = list(script)
            self.inputs: list[list[Any]] = []

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                               output_schema: Any, handoffs: Any, tracing: Any, **_: Any) -> ModelResponse:
            with generation_span(model="scripted-model", disabled=tracing.is_disabled()) as span:
                i = len(self.inputs)
                self.inputs.append([input] if isinstance(input, str) else list(input))
                step = self.script[i]
                if isinstance(step, str):
                    out: list[Any] = [ResponseOutputMessage(
                        id=f"msg_{i}", type="message", role="assistant", status="completed",
                        content=[ResponseOutputText(type="output_text", text=step, annotations=[])])]
                else:
                    out = [ResponseFunctionToolCall(type="function_call", id=f"fc_{i}_{j}", call_id=f"call_{i}_{j}",
                                                    name=name, arguments=json.dumps(args), status="completed")
                           for j, (name, args) in enumerate(step)]
                span.span_data.usage = {"input_tokens": 100, "output_tokens": 10}
                return ModelResponse(output=out, usage=Usage(requests=1, input_tokens=100, output_tokens=10,
                                                             total_tokens=110), response_id=f"resp_{i}")

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - Runner.run only
            raise NotImplementedError

        def tool_outputs(self) -> list[str]:
            """The tool outputs the model received last, in call order."""
            return [str(item["output"]) for item in self.inputs[-1]
                    if isinstance(item, dict) and item.get("type") == "function_call_output"]

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    otel_loopguard.install(tracer_provider=tp, key=KEY)
    set_trace_processors([])  # no export to OpenAI: drop the SDK's default processor first
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    tracer = tp.get_tracer("genai-contrib-test")

    invoked: list[tuple[str, dict[str, Any]]] = []

    def ran(tool: str, **args: Any) -> None:
        invoked.append((tool, args))
        tracer.start_span(f"{tool}.body").end()  # a child of the tool span: proof the body ran

    @function_tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order."""
        ran("lookup_order", order_id=order_id)
        return {"order": order_id, "status": "in transit"}

    @function_tool
    def search_cases(query: str, cursor: Optional[str] = None) -> dict:
        """Search support cases, one page at a time."""
        ran("search_cases", query=query, cursor=cursor)
        page = 0 if cursor is None else int(cursor.split("-")[1])
        return {"items": [{"id": f"case-{page}-{i}"} for i in range(3)], "next_cursor": f"p-{page + 1}"}

    model = ScriptedModel(_script(scenario))
    agent = Agent(name="Order agent", instructions="Help with orders.", tools=[lookup_order, search_cases],
                  model=model, model_settings=ModelSettings(parallel_tool_calls=True))
    if scenario in ("enforce", "pagination"):
        guard = otel_loopguard.guard(key=KEY)
        from otel_loopguard.enforce.openai_agents import guard_agent

        guard_agent(guard, agent)

    try:
        result = asyncio.run(Runner.run(agent, "Where is order A12?", max_turns=40,
                                        run_config=RunConfig(workflow_name="loopguard-genai-contrib")))
    finally:
        instrumentor.uninstrument()
        set_trace_processors([])
    if not tp.force_flush(10_000):
        print("force_flush timed out", file=sys.stderr)
        return 1
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    with open(out_path, "wb") as f:
        f.write(encode_spans(spans).SerializeToString())
    tp.shutdown()
    print(json.dumps({"invoked": invoked, "final_output": str(result.final_output),
                      "requests": len(model.inputs), "tool_outputs": model.tool_outputs()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
