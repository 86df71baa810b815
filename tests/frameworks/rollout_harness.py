"""One scripted run on each adapter (decorator, OpenAI Agents SDK, LangChain middleware), for
the run-level and wall-time tests: test_rollout.py's adapters, with tools whose behaviour a
test chooses (fail, return the same answer, take time on a fake clock), the processor
installed in front of an in-memory exporter, and the exported spans kept for the audit.

    out = drive(policy_yaml, turns, behave=..., clock=FakeClock(), mode="observe")

`behave(tool, args)` is what every fake tool does: return a result, or raise `Failure`
(a failed call on every adapter). Tools: lookup_order (order_id), get_shipping (order_id),
search_cases (query).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.enforce import ToolGuard, make_guard

KEY = "rollout-harness-key-3Vd8Qk1m"
DENIED = "Not executed: loop guard"
NUDGE = "[loop guard] "
TOOLS = ("lookup_order", "get_shipping", "search_cases")

Call = tuple[str, dict[str, Any]]
Behave = Callable[[str, dict[str, Any]], Any]


class Failure(Exception):
    """What a fake tool raises to fail."""


class FakeClock:
    """Nanoseconds that move only when a tool takes time (`advance`), plus a microsecond per
    reading so events keep their order. Shared by the guard and, patched in, the SDK's spans."""

    def __init__(self, start_s: float = 1_700_000_000.0):
        self.now = int(start_s * 1e9)

    def __call__(self) -> int:
        self.now += 1_000
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)


def same_answer(tool: str, args: dict[str, Any]) -> Any:
    """The same answer for the same arguments (test_rollout's tools)."""
    if tool == "search_cases":
        return {"cases": [], "total": 0}
    if tool == "get_shipping":
        return {"order": args["order_id"], "carrier": "DHL"}
    return {"order": args["order_id"], "status": "delivered"}


@dataclass
class Outcome:
    ran: list[Call]
    outputs: list[str]  # what the model read for each requested call, in order
    decisions: list[tuple[str, str, str]]  # (decision, kind, tool) of the guard's events, in time order
    spans: list[ReadableSpan] = field(default_factory=list)
    guard_calls: dict[str, list[int]] = field(default_factory=dict)  # guard's verb -> the calls it marked

    def denied(self) -> list[int]:
        return [i for i, out in enumerate(self.outputs, start=1) if out.startswith(DENIED)]

    def nudged(self) -> list[int]:
        return [i for i, out in enumerate(self.outputs, start=1) if NUDGE in out or "loop_guard_notice" in out]

    def count(self, tool: str) -> int:
        return sum(1 for t, _ in self.ran if t == tool)

    def processor_marks(self, verb: str, kind: Optional[str] = None) -> list[int]:
        """The calls (by loopguard.seq) whose tool span carries the processor's `verb`."""
        out = []
        for s in self.spans:
            a = s.attributes or {}
            if "loopguard.seq" not in a or a.get("loopguard.duplicate_of"):
                continue
            for e in s.events:
                ea = e.attributes or {}
                if (e.name == "loopguard.decision" and "loopguard.dispatched" not in ea
                        and ea.get("loopguard.decision") == verb and (kind is None or ea.get("loopguard.finding.kind") == kind)):
                    out.append(int(a["loopguard.seq"]))
        return sorted(set(out))

    def audit(self) -> dict[str, Any]:
        """The audit's score of the exported spans (one run)."""
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        return _audit(encode_spans(self.spans).SerializeToString())


def _audit(payload: bytes) -> dict[str, Any]:
    import tempfile

    from otel_loopguard.audit.command import audit
    from otel_loopguard.audit.report import to_json

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "spans.pb")
        with open(path, "wb") as f:
            f.write(payload)
        old = os.environ.get("OTEL_LOOPGUARD_KEY")
        os.environ["OTEL_LOOPGUARD_KEY"] = KEY
        try:
            runs = json.loads(to_json(audit([path])))["runs"]
        finally:
            if old is None:
                del os.environ["OTEL_LOOPGUARD_KEY"]
            else:
                os.environ["OTEL_LOOPGUARD_KEY"] = old
    [run] = [r for r in runs if r["score"].get("tool_calls")]
    return run


def guard_decisions(spans: list[ReadableSpan]) -> list[tuple[str, str, str]]:
    return [(str(a["loopguard.decision"]), str(a["loopguard.finding.kind"]), str(a["loopguard.tool.name"]))
            for _, a in _guard_events(spans)]


def _guard_events(spans: list[ReadableSpan]) -> list[tuple[int, Any]]:
    events = sorted(((e.timestamp, e.attributes) for s in spans for e in s.events
                     if e.name == "loopguard.decision" and "loopguard.dispatched" in (e.attributes or {})),
                    key=lambda te: te[0])
    return [(t, a) for t, a in events]


def _guard_calls(spans: list[ReadableSpan], bodies: list[tuple[int, int]]) -> dict[str, list[int]]:
    """Each guard event's call, by time against the tools' bodies (start, end on the fake
    clock): an event before body k's start and after body k-1's end is call k's check, unless
    it is a late warning (its reason says how much time the run *used*), which is call k-1's."""
    out: dict[str, list[int]] = {}
    for t, a in _guard_events(spans):
        k = sum(1 for start, _ in bodies if start < t) + 1
        reason = str(a.get("loopguard.finding.reason", ""))
        if k > 1 and reason.startswith("the run used") and bodies[k - 2][1] < t:
            k -= 1
        out.setdefault(str(a["loopguard.decision"]), []).append(k)
    return out


def policy_guard(tmp_path: Any, policy: str, *, mode: Optional[str] = None, clock: Optional[FakeClock] = None) -> ToolGuard:
    """A guard on `policy`; without `mode`, the settings decide (enforce when none is set)."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy, encoding="utf-8")
    return make_guard(key=KEY, policy=str(path), mode=mode, clock=clock)


# -- the three adapters ------------------------------------------------------------------------

class _Tools:
    """The fake tools' shared body: log the call (and its time on the fake clock), behave."""

    def __init__(self, behave: Behave, clock: Optional[FakeClock]):
        self.behave, self.clock = behave, clock
        self.ran: list[Call] = []
        self.bodies: list[tuple[int, int]] = []

    def run(self, tool: str, args: dict[str, Any]) -> Any:
        self.ran.append((tool, args))
        start = self.clock() if self.clock else 0
        try:
            return self.behave(tool, args)
        finally:
            self.bodies.append((start, self.clock() if self.clock else 0))


def _plain(guard: ToolGuard, turns: list[list[Call]], tools: _Tools) -> Outcome:
    from otel_loopguard.processor import install

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(tracer_provider=provider, key=KEY)
    tracer, outputs = provider.get_tracer("rollout"), []

    def make(name: str) -> Callable[..., Any]:
        def body(order_id: str = "", query: str = "") -> Any:
            return tools.run(name, {"query": query} if name == "search_cases" else {"order_id": order_id})
        body.__name__ = name
        return guard.tool(body)

    guarded = {name: make(name) for name in TOOLS}
    try:
        with tracer.start_as_current_span("invoke_agent support"):
            for turn in turns:
                for tool, args in turn:
                    # The application's own tool span around the guarded call (docs/guard.md).
                    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                             "gen_ai.tool.call.arguments": json.dumps(args)}
                    with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs,
                                                      record_exception=False, set_status_on_exception=True) as span:
                        try:
                            out = guarded[tool](**args)
                        except Failure as exc:
                            outputs.append(f"error: {exc}")
                            span.set_status(_error())
                            continue
                        span.set_attribute("gen_ai.tool.call.result", json.dumps(out, default=str))
                        outputs.append(str(out))
        assert provider.force_flush(10_000)
        spans = list(exporter.get_finished_spans())
    finally:
        provider.shutdown()
    return Outcome(tools.ran, outputs, guard_decisions(spans), spans)


def _error() -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR)


def _agents(guard: ToolGuard, turns: list[list[Call]], tools: _Tools, instrumentation: str = "openllmetry") -> Outcome:
    from agents import function_tool

    from .agents_helpers import make_stack, run_agent

    @function_tool
    def lookup_order(order_id: str) -> Any:
        """Look up an order."""
        return tools.run("lookup_order", {"order_id": order_id})

    @function_tool
    def get_shipping(order_id: str) -> Any:
        """Shipping details."""
        return tools.run("get_shipping", {"order_id": order_id})

    @function_tool
    def search_cases(query: str) -> Any:
        """Search support cases."""
        return tools.run("search_cases", {"query": query})

    stack = make_stack(instrumentation)
    try:
        with stack.tracer.start_as_current_span("invoke_agent support"):
            _, model = run_agent([lookup_order, get_shipping, search_cases], [*turns, "done"], guard=guard)
        spans = stack.spans()
        return Outcome(tools.ran, model.tool_outputs(), guard_decisions(spans), spans)
    finally:
        stack.shutdown()


def _langchain(guard: ToolGuard, turns: list[list[Call]], tools: _Tools) -> Outcome:
    from langchain_core.tools import ToolException, tool

    from otel_loopguard.enforce.langchain import LoopGuardMiddleware

    from .lc_helpers import instrumented, model, run_agent

    def body(name: str, args: dict[str, Any]) -> Any:
        try:
            return tools.run(name, args)
        except Failure as exc:
            raise ToolException(str(exc)) from None

    @tool
    def lookup_order(order_id: str) -> Any:
        """Look up an order."""
        return body("lookup_order", {"order_id": order_id})

    @tool
    def get_shipping(order_id: str) -> Any:
        """Shipping details."""
        return body("get_shipping", {"order_id": order_id})

    @tool
    def search_cases(query: str) -> Any:
        """Search support cases."""
        return body("search_cases", {"query": query})

    for t in (lookup_order, get_shipping, search_cases):
        t.handle_tool_error = True  # a ToolException becomes an error ToolMessage
    with instrumented("openllmetry") as stack:
        chat = model([*turns, "done"])
        tracer = stack.provider.get_tracer("rollout")
        with tracer.start_as_current_span("invoke_agent support"):
            run_agent(chat, [lookup_order, get_shipping, search_cases], [LoopGuardMiddleware(guard)])
        outputs = [str(m.content) for m in chat.tool_messages()]
        spans = stack.spans()
        return Outcome(tools.ran, outputs, guard_decisions(spans), spans)


ADAPTERS = {"decorator": _plain, "openai_agents": _agents, "langchain": _langchain}


@contextlib.contextmanager
def sdk_clock(clock: Optional[FakeClock]) -> Iterator[None]:
    """Span and event times from the fake clock too (the SDK's, and OpenLLMetry's agents
    bridge's own start times), so the processor times calls as the guard does."""
    if clock is None:
        yield
        return
    import time

    import opentelemetry.sdk.trace as sdk_trace

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sdk_trace, "time_ns", clock)
        mp.setattr(time, "time_ns", clock)
        yield


@pytest.fixture(params=sorted(ADAPTERS))
def drive(request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Outcome]:
    for name in [n for n in os.environ if n.startswith("OTEL_LOOPGUARD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-no-network")
    monkeypatch.setenv("TRACELOOP_METRICS_ENABLED", "false")
    adapter = ADAPTERS[request.param]

    def run(policy: str, turns: list[list[Call]], *, behave: Behave = same_answer, clock: Optional[FakeClock] = None,
            mode: Optional[str] = None, before: Optional[Callable[[], None]] = None) -> Outcome:
        guard = policy_guard(tmp_path, policy, mode=mode, clock=clock)
        # The processor install() puts in front of each stack judges by the same file.
        monkeypatch.setenv("OTEL_LOOPGUARD_POLICY", str(tmp_path / "policy.yaml"))
        if before is not None:  # between the guard's making and the processor's install()
            before()
        tools = _Tools(behave, clock)
        with sdk_clock(clock):
            out = adapter(guard, turns, tools)
        if clock is not None:
            out.guard_calls = _guard_calls(out.spans, tools.bodies)
        return out

    run.adapter = request.param  # type: ignore[attr-defined]
    return run
