"""Real SDK pieces for processor tests: a provider with an in-memory exporter, span emitters."""

from __future__ import annotations

import copy
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from otel_loopguard.processor import DECISION_EVENT, LoopguardHandle, install

from .captures import CAPTURED

# A digest key nobody else uses; tests look for it (and its hex form) in everything exported.
KEY = "processor-test-key-7Hq2Zr9Wc4"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
CONTRACT_TAGS = (
    "loopguard.tool.name",
    "loopguard.args.digest",
    "loopguard.result.digest",
    "loopguard.seq",
    "loopguard.run.id",
    "loopguard.turn",
    "loopguard.outcome",
    "loopguard.key.id",
    "loopguard.mode",
)
# Every attribute key that holds raw tool arguments or results, under any convention we know.
RAW_KEYS = (
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.tool.arguments",
    "gen_ai.tool.result",
    "input.value",
    "output.value",
    "tool.parameters_value",
    "traceloop.entity.input",
    "traceloop.entity.output",
)

# Tool spans of one successful lookup_order({"order_id": "A-1"}) call, per convention combo.
TOOL_ENTRIES = ("genai_tool", "oi_oa_tool", "oi_lc_tool_1", "tl_lc_tool_1", "tl_oa_tool")
# The model span of the same combo (the decision that requested the call).
MODEL_OF = {
    "genai_tool": "genai_chat",
    "oi_oa_tool": "oi_oa_llm",
    "oi_lc_tool_1": "oi_lc_llm",
    "oi_lc_tool_2": "oi_lc_llm",
    "tl_lc_tool_1": "tl_lc_chat",
    "tl_lc_tool_2": "tl_lc_chat",
    "tl_oa_tool": "tl_oa_chat",
    "genai_tool_error": "genai_chat",
    "oi_lc_tool_raise": "oi_lc_llm",
    "oi_lc_tool_toolexception": "oi_lc_llm",
    "tl_lc_tool_toolexception": "tl_lc_chat",
}

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CALL_ID = re.compile(r"call_t\w+")


def captured(name: str) -> dict[str, Any]:
    """A deep copy of one captured span entry (name, status, attributes)."""
    return copy.deepcopy(CAPTURED[name])


def _map_strings(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value


def fresh_noise(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The same call as another dispatch: new uuids (LangGraph checkpoints) and a new tool_call_id."""
    call_id = f"call_{uuid.uuid4().hex[:10]}"
    new_uuid = str(uuid.uuid4())

    def fn(text: str) -> str:
        return _CALL_ID.sub(call_id, _UUID.sub(new_uuid, text))

    return {k: _map_strings(v, fn) for k, v in attributes.items()}


def replaced(attributes: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    """Every occurrence of `old` in string values replaced (a different argument/result)."""
    return {k: _map_strings(v, lambda t: t.replace(old, new)) for k, v in attributes.items()}


def emit(
    tracer: Tracer,
    entry: Mapping[str, Any],
    *,
    attributes: Optional[Mapping[str, Any]] = None,
    start: Optional[int] = None,
    end: Optional[int] = None,
) -> ReadableSpan:
    """One span as the instrumentation would make it: attributes, status, then end."""
    span = tracer.start_span(entry["name"], start_time=start)
    span.set_attributes(dict(attributes if attributes is not None else entry["attributes"]))
    if entry.get("status") == "ERROR":
        span.set_status(Status(StatusCode.ERROR, entry.get("description")))
    elif entry.get("status") == "OK":
        span.set_status(Status(StatusCode.OK))
    span.end(end_time=end)
    return span  # type: ignore[return-value]


def emit_turn(tracer: Tracer, tool_entry: str, *, noise: bool = True, attributes: Optional[dict[str, Any]] = None) -> Any:
    """A model decision, then the tool call it requested (both with the combo's real attributes)."""
    model = captured(MODEL_OF[tool_entry])
    emit(tracer, model)
    tool = captured(tool_entry)
    attrs = attributes if attributes is not None else tool["attributes"]
    return emit(tracer, tool, attributes=fresh_noise(attrs) if noise else attrs)


def tags(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("loopguard.")}


def decisions(span: ReadableSpan, kind: Optional[str] = None) -> list[dict[str, Any]]:
    out = [dict(e.attributes or {}) for e in span.events if e.name == DECISION_EVENT]
    return [d for d in out if kind is None or d.get("loopguard.finding.kind") == kind]


@dataclass
class Stack:
    """TracerProvider -> [loop guard] -> Simple/BatchSpanProcessor -> InMemorySpanExporter."""

    tp: TracerProvider
    exporter: InMemorySpanExporter
    handle: Optional[LoopguardHandle] = None
    _closed: bool = field(default=False, repr=False)

    @property
    def tracer(self) -> Tracer:
        return self.tp.get_tracer("processor-tests")

    def spans(self) -> list[ReadableSpan]:
        assert self.tp.force_flush(10_000), "force_flush timed out"
        return list(self.exporter.get_finished_spans())

    def tool_spans(self) -> list[ReadableSpan]:
        """Exported tool spans (tagged or not), in start order."""
        names = {CAPTURED[e]["name"] for e in CAPTURED if "tool" in e} | {"execute_tool lookup_order"}
        found = [s for s in self.spans() if s.name in names or s.name.startswith("execute_tool")]
        return sorted(found, key=lambda s: s.start_time or 0)

    def tagged(self) -> list[ReadableSpan]:
        return sorted((s for s in self.spans() if "loopguard.seq" in (s.attributes or {})), key=lambda s: s.start_time or 0)

    def shutdown(self) -> None:
        if not self._closed:
            self._closed = True
            self.tp.shutdown()


def make_stack(*, batch: bool = False, installed: bool = True, **install_kwargs: Any) -> Stack:
    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "processor-tests"}))
    tp.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=20) if batch else SimpleSpanProcessor(exporter))
    stack = Stack(tp, exporter)
    if installed:
        install_kwargs.setdefault("key", KEY)
        stack.handle = install(tracer_provider=tp, **install_kwargs)
    return stack


def trace_hex(span: ReadableSpan) -> str:
    return format(span.context.trace_id, "032x")


def span_hex(span: ReadableSpan) -> str:
    return format(span.context.span_id, "016x")


def all_text(spans: Iterable[ReadableSpan]) -> str:
    """Everything a backend would receive about these spans, as text."""
    return "\n".join(s.to_json() for s in spans)


def timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


class BlockedTagger:
    """Patches Tagger.tag so the worker blocks inside its first span until released."""

    def __init__(self, monkeypatch: Any, *, safety_seconds: float = 10.0):
        import threading

        from otel_loopguard.processor.tagger import Tagger

        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        original = Tagger.tag

        def tag(tagger: Any, span: Any) -> Any:
            self.calls += 1
            if self.calls == 1:
                self.started.set()
                self.release.wait(safety_seconds)  # never hangs the suite
            return original(tagger, span)

        monkeypatch.setattr(Tagger, "tag", tag)


def raw_values_present(span: ReadableSpan, needles: Iterable[str]) -> list[str]:
    """Which needles occur in any attribute value of the span."""
    text = "\n".join(repr(v) for v in (span.attributes or {}).values())
    return [n for n in needles if n in text]
