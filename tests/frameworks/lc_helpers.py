"""LangChain v1 `create_agent` with a scripted chat model, no network, traced for real.

`Stack` is one TracerProvider with the loop guard's processor installed (observe
tagging), an in-memory exporter behind it, and one LangChain instrumentation:
OpenInference or OpenLLMetry (Traceloop). Instrumentors patch LangChain globally,
so one is active at a time: `instrumented()` undoes its patching on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import Field

from otel_loopguard.enforce import ToolGuard, make_guard
from otel_loopguard.processor import LoopguardHandle, install

KEY = "frameworks-lc-test-key-4Rk8Tm2Qz"
INSTRUMENTATIONS = ("openinference", "openllmetry")
DECISION = "loopguard.decision"

# A scripted model step: a list of (tool, args) requested in one AIMessage, or the final answer.
Step = Any


class ScriptedChatModel(BaseChatModel):
    """Answers with the scripted AIMessages in order, then "done"; bind_tools is a no-op.

    `seen` keeps the messages of every request: what the model was shown."""

    script: list = Field(default_factory=list)
    seen: list = Field(default_factory=list)
    model_name: str = "scripted-chat"

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        turn = len(self.seen)
        self.seen.append(list(messages))
        step = self.script[turn] if turn < len(self.script) else "done"
        usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
        if isinstance(step, str):
            msg = AIMessage(content=step, id=f"msg-{turn}", usage_metadata=usage)
        else:
            calls = [{"name": name, "args": args, "id": f"call_{turn}_{j}", "type": "tool_call"}
                     for j, (name, args) in enumerate(step)]
            msg = AIMessage(content="", tool_calls=calls, id=f"msg-{turn}", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def tool_messages(self) -> list[ToolMessage]:
        """The tool results the model was shown on its last request, in order."""
        last = self.seen[-1] if self.seen else []
        return [m for m in last if isinstance(m, ToolMessage)]


def model(script: Sequence[Step]) -> ScriptedChatModel:
    return ScriptedChatModel(script=list(script), seen=[])


def repeat(tool: str, args: dict[str, Any], times: int) -> list[Step]:
    """`times` model turns, each requesting the same single call."""
    return [[(tool, dict(args))] for _ in range(times)]


def run_agent(chat: ScriptedChatModel, tools: Sequence[Any], middleware: Sequence[Any] = (), *,
              invoke: str = "sync", config: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    agent = create_agent(chat, tools=list(tools), middleware=list(middleware), system_prompt="Help with orders.",
                         name="order_agent")
    inputs = {"messages": [HumanMessage("Where is order A12?")]}
    settings = {"recursion_limit": 100, **(config or {})}
    if invoke == "async":
        return asyncio.run(agent.ainvoke(inputs, settings))
    return agent.invoke(inputs, settings)


def guard(tmp_path: Any = None, policy: Optional[str] = None) -> ToolGuard:
    path = None
    if policy is not None:
        path = tmp_path / "policy.yaml"
        path.write_text(policy, encoding="utf-8")
    return make_guard(key=KEY, policy=str(path) if path else None)


# -- tracing --------------------------------------------------------------------------------
@dataclass
class Stack:
    instrumentation: str
    provider: TracerProvider
    exporter: InMemorySpanExporter
    handle: LoopguardHandle
    instrumentor: Any = None

    def spans(self) -> list[ReadableSpan]:
        """Everything exported so far (tool spans are tagged off-thread: flushed first)."""
        assert self.provider.force_flush(10_000)
        return list(self.exporter.get_finished_spans())

    def clear(self) -> None:
        self.provider.force_flush(10_000)
        self.exporter.clear()

    def tool_spans(self, spans: Sequence[ReadableSpan], tool: Optional[str] = None) -> list[ReadableSpan]:
        """The spans the instrumentation made for tool executions, in start order."""
        found = [s for s in spans if _tool_name(s) is not None and (tool is None or _tool_name(s) == tool)]
        return sorted(found, key=lambda s: s.start_time or 0)


def _tool_name(span: ReadableSpan) -> Optional[str]:
    attrs = span.attributes or {}
    if attrs.get("openinference.span.kind") == "TOOL":
        return str(attrs.get("tool.name") or span.name)
    if attrs.get("traceloop.span.kind") == "tool" or attrs.get("gen_ai.operation.name") == "execute_tool":
        return str(attrs.get("gen_ai.tool.name") or attrs.get("traceloop.entity.name") or span.name)
    return None


def decision_events(spans: Sequence[ReadableSpan], verdict: Optional[str] = None) -> list[tuple[ReadableSpan, Any]]:
    """(span, event) for every loopguard.decision event, in time order."""
    found = [(s, e) for s in spans for e in s.events
             if e.name == DECISION and (verdict is None or e.attributes.get(DECISION) == verdict)]
    return sorted(found, key=lambda se: se[1].timestamp)


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    pid = parent.context.span_id
    return [s for s in spans if s.parent is not None and s.parent.span_id == pid]


@contextlib.contextmanager
def instrumented(instrumentation: str) -> Iterator[Stack]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handle = install(tracer_provider=provider, key=KEY)
    if instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor: Any = LangChainInstrumentor()
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield Stack(instrumentation, provider, exporter, handle, instrumentor)
    finally:
        instrumentor.uninstrument()
        if instrumentation == "openllmetry":
            _undo_openllmetry_patches()
        provider.shutdown()


# OpenLLMetry 0.62.4's uninstrument() passes dotted names ("BaseCallbackManager.__init__")
# to opentelemetry's unwrap(), which looks them up as one attribute and silently does
# nothing: its callback handler stays in every CallbackManager, still exporting to the
# old provider, and a later instrument() finds it there and adds no new one.
_OPENLLMETRY_PATCHES = (
    ("langchain_core.callbacks", "BaseCallbackManager", ("__init__",)),
    ("langgraph.pregel", "Pregel", ("stream", "astream")),
    ("langgraph.types", "Command", ("__init__",)),
    ("langchain.agents.middleware.types", "AgentMiddleware",
     ("before_model", "after_model", "before_agent", "after_agent",
      "abefore_model", "aafter_model", "abefore_agent", "aafter_agent")),
)


def _undo_openllmetry_patches() -> None:
    for module_name, class_name, methods in _OPENLLMETRY_PATCHES:
        module = sys.modules.get(module_name)
        cls = getattr(module, class_name, None) if module else None
        for method in methods:
            patched = vars(cls).get(method) if cls is not None else None
            wrapper = getattr(patched, "_self_wrapper", None)
            if wrapper is not None and _from_openllmetry(wrapper):
                setattr(cls, method, patched.__wrapped__)


def _from_openllmetry(wrapper: Any) -> bool:
    module = getattr(wrapper, "__module__", None) or getattr(type(wrapper), "__module__", "")
    return str(module).startswith("opentelemetry.instrumentation.langchain")


@pytest.fixture(autouse=True)
def _clean_lc_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_LOOPGUARD_* setting leaks in from the shell."""
    for name in list(os.environ):
        if name.startswith("OTEL_LOOPGUARD_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module", params=INSTRUMENTATIONS)
def lc_instrumented(request: pytest.FixtureRequest) -> Iterator[Stack]:
    """One instrumentation at a time, for the whole module (instrumenting is global)."""
    with instrumented(request.param) as stack:
        yield stack


@pytest.fixture
def lc(lc_instrumented: Stack) -> Iterator[Stack]:
    """The module's stack, with nothing exported yet."""
    lc_instrumented.clear()
    yield lc_instrumented
    lc_instrumented.clear()
