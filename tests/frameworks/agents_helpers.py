"""Real OpenAI Agents SDK runs for the adapter tests: a scripted model, no network, no key.

    model = ScriptedModel([[("lookup_order", {"order_id": "A12"})], ..., "done"])

Each entry of the script is one model response: a list of tool calls (several are
parallel calls of one turn) or a string, the final answer. The model keeps every
input it was sent, so a test can read the tool outputs the model actually saw.

`make_stack` builds what an application would have: an SDK TracerProvider with an
in-memory exporter, `otel_loopguard.install()` in front of it (observe tagging),
and one OTel bridge for the Agents SDK (OpenInference or OpenLLMetry).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import pytest
from agents import Agent, ModelSettings, RunConfig, Runner, set_trace_processors
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tracing import generation_span
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.processor import LoopguardHandle, install

KEY = "frameworks-test-key-Zq81Lm3v"
INSTRUMENTATIONS = ("openinference", "openllmetry")
DENIED_PREFIX = "Not executed: loop guard"
NUDGE_PREFIX = "[loop guard]"

Call = tuple[str, dict[str, Any]]
Turn = Union[Sequence[Call], str]


class ScriptedModel(Model):
    """Answers from a script. Wraps each response in a generation span, as the SDK's own
    models do (a custom Model without it produces no model span at all)."""

    def __init__(self, script: Sequence[Turn]):
        self.script = list(script)
        self.inputs: list[list[Any]] = []  # what the model was sent, per request

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
                out = [ResponseFunctionToolCall(type="function_call", id=f"fc_{i}_{j}", call_id=call_id(i, j),
                                                name=name, arguments=json.dumps(args), status="completed")
                       for j, (name, args) in enumerate(step)]
            usage = Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
            span.span_data.usage = {"input_tokens": 100, "output_tokens": 10}
            return ModelResponse(output=out, usage=usage, response_id=f"resp_{i}")

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - Runner.run only
        raise NotImplementedError

    @property
    def requests(self) -> int:
        return len(self.inputs)

    def tool_outputs(self) -> list[str]:
        """The tool outputs the model received, in the order the calls were requested."""
        seen = {item["call_id"]: item["output"] for item in self.inputs[-1]
                if isinstance(item, dict) and item.get("type") == "function_call_output"}
        order = [call_id(i, j) for i, step in enumerate(self.script) if not isinstance(step, str)
                 for j in range(len(step))]
        return [seen[c] for c in order if c in seen]


def call_id(turn: int, index: int) -> str:
    return f"call_{turn}_{index}"


def repeat(call: Call, times: int) -> list[list[Call]]:
    """`times` model turns, each requesting the same single call."""
    return [[call] for _ in range(times)]


def run_agent(tools: list[Any], script: Sequence[Turn], *, guard: Any = None, max_turns: int = 40) -> tuple[Any, ScriptedModel]:
    """One Runner.run of an agent with these tools (guarded by `guard` when given)."""
    from otel_loopguard.enforce.openai_agents import guard_agent

    model = ScriptedModel(script)
    agent = Agent(name="Order agent", instructions="Help with orders.", tools=tools, model=model,
                  model_settings=ModelSettings(parallel_tool_calls=True))
    if guard is not None:
        guard_agent(guard, agent)
    result = asyncio.run(Runner.run(agent, "Where is order A12?", max_turns=max_turns,
                                    run_config=RunConfig(workflow_name="loopguard-frameworks")))
    return result, model


def _instrumentor(name: str) -> Any:
    if name == "openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    elif name == "openllmetry":
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    else:
        raise ValueError(name)
    return OpenAIAgentsInstrumentor()


@dataclass
class AgentsStack:
    """TracerProvider -> [loop guard processor] -> SimpleSpanProcessor -> InMemorySpanExporter,
    with an Agents SDK bridge (or none) feeding it."""

    instrumentation: Optional[str]
    tp: TracerProvider
    exporter: InMemorySpanExporter
    handle: Optional[LoopguardHandle]
    _instrumentor: Any = None
    _closed: bool = field(default=False, repr=False)

    @property
    def tracer(self) -> Any:
        return self.tp.get_tracer("frameworks-tests")

    def spans(self) -> list[ReadableSpan]:
        assert self.tp.force_flush(10_000), "force_flush timed out"
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def tool_spans(self, name: Optional[str] = None) -> list[ReadableSpan]:
        """The bridge's tool spans (one per function call the SDK handled), in start order."""
        out = []
        for s in self.spans():
            a = s.attributes or {}
            if a.get("openinference.span.kind") == "TOOL" or a.get("traceloop.span.kind") == "tool":
                if name is None or a.get("tool.name", a.get("gen_ai.tool.name")) == name:
                    out.append(s)
        return out

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._instrumentor is not None:
            self._instrumentor.uninstrument()
        set_trace_processors([])  # OpenLLMetry's uninstrument leaves its SDK processor behind
        self.tp.shutdown()


def make_stack(instrumentation: Optional[str], *, installed: bool = True, **install_kwargs: Any) -> AgentsStack:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    handle = install(tracer_provider=tp, key=KEY, **install_kwargs) if installed else None
    # No export to OpenAI: drop the SDK's default trace processor before the bridge adds its own.
    set_trace_processors([])
    instrumentor = None
    if instrumentation is not None:
        instrumentor = _instrumentor(instrumentation)
        instrumentor.instrument(tracer_provider=tp)
    return AgentsStack(instrumentation, tp, exporter, handle, instrumentor)


def guard_events(span: ReadableSpan, decision: Optional[str] = None) -> list[dict[str, Any]]:
    """The guard's `loopguard.decision` events (the processor's carry no `loopguard.dispatched`)."""
    out = [dict(e.attributes or {}) for e in span.events
           if e.name == "loopguard.decision" and "loopguard.dispatched" in (e.attributes or {})]
    return [e for e in out if decision is None or e["loopguard.decision"] == decision]


def processor_events(span: ReadableSpan, decision: Optional[str] = None) -> list[dict[str, Any]]:
    out = [dict(e.attributes or {}) for e in span.events
           if e.name == "loopguard.decision" and "loopguard.dispatched" not in (e.attributes or {})]
    return [e for e in out if decision is None or e["loopguard.decision"] == decision]


# Fixtures: imported by name into the test module (not a folder-wide conftest, which the
# LangChain tests in this folder would pick up too).

@pytest.fixture(autouse=True)
def _clean_agents_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_LOOPGUARD_* setting leaks in; nothing could reach OpenAI; no metrics set-up."""
    for name in list(os.environ):
        if name.startswith("OTEL_LOOPGUARD_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-no-network")
    monkeypatch.setenv("TRACELOOP_METRICS_ENABLED", "false")


@pytest.fixture
def stacks() -> Iterator[Callable[..., AgentsStack]]:
    """make_stack(...), undone at teardown (bridge uninstrumented, SDK processors cleared)."""
    made: list[AgentsStack] = []

    def factory(instrumentation: Optional[str], **kwargs: Any) -> AgentsStack:
        stack = make_stack(instrumentation, **kwargs)
        made.append(stack)
        return stack

    yield factory
    for stack in made:
        stack.shutdown()


@pytest.fixture(params=INSTRUMENTATIONS)
def stack(request: pytest.FixtureRequest, stacks: Callable[..., AgentsStack]) -> AgentsStack:
    return stacks(request.param)
