"""Per-tool rollout semantics (docs/rollout.md), the same on all three adapters.

One mixed policy: `search_cases` observe-only (`enforce: false`), `get_shipping` capped at
two calls, `lookup_order` enforced (the default for a read-only tool). Each scenario is a
scripted model's requests, driven through the plain decorator, the OpenAI Agents SDK adapter
and LangChain v1's `create_agent` middleware, with real tools that count their invocations:

- a stop caused by the observe-only tool is a `would_block` for the run: the next enforced
  call (even its first) still runs;
- a per-tool cap refuses that tool only: the run goes on with the others;
- a run-level stop caused by an enforced tool denies every later call of an enforced tool;
  observe-only tools still run (with `would_block` decisions).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from otel_loopguard.enforce import ToolGuard, make_guard  # noqa: E402

from .rollout_harness import same_answer as _results  # noqa: E402 - what each fake tool returns

POLICY = """\
version: rollout-1
tools:
  search_cases: {enforce: false}
  get_shipping: {max_calls: 2}
"""
KEY = "rollout-test-key-7Hq2Lp9w"
DENIED = "Not executed: loop guard"

Call = tuple[str, dict[str, Any]]


@dataclass
class Outcome:
    ran: list[Call]  # what the tools really executed, in order
    outputs: list[str]  # what the model read for each requested call, in order
    decisions: list[tuple[str, str, str]]  # (decision, kind, tool) of the guard's events

    def denied(self) -> list[int]:
        return [i for i, out in enumerate(self.outputs, start=1) if out.startswith(DENIED)]

    def count(self, tool: str) -> int:
        return sum(1 for t, _ in self.ran if t == tool)


def _guard(tmp_path: Any, enforce: bool = True) -> ToolGuard:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return make_guard(key=KEY, policy=str(path), enforce=enforce)


def _guard_decisions(spans: list[ReadableSpan]) -> list[tuple[str, str, str]]:
    events = sorted((e for s in spans for e in s.events
                     if e.name == "loopguard.decision" and "loopguard.dispatched" in (e.attributes or {})),
                    key=lambda e: e.timestamp)
    return [(str(e.attributes["loopguard.decision"]), str(e.attributes["loopguard.finding.kind"]),
             str(e.attributes["loopguard.tool.name"])) for e in events]


# -- the three adapters, each driven by the same scripted requests ----------------------------

def _plain(guard: ToolGuard, turns: list[list[Call]]) -> Outcome:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer, ran, outputs = provider.get_tracer("rollout"), [], []

    def make(name: str) -> Callable[..., Any]:
        def body(order_id: str = "", query: str = "") -> dict:
            args = {"query": query} if name == "search_cases" else {"order_id": order_id}
            ran.append((name, args))
            return _results(name, args)
        body.__name__ = name
        return guard.tool(body)

    tools = {name: make(name) for name in ("lookup_order", "get_shipping", "search_cases")}
    with tracer.start_as_current_span("invoke_agent support"):
        for turn in turns:  # the scripted model's requests, answered one by one
            for tool, args in turn:
                outputs.append(str(tools[tool](**args)))
    return Outcome(ran, outputs, _guard_decisions(list(exporter.get_finished_spans())))


def _agents(guard: ToolGuard, turns: list[list[Call]]) -> Outcome:
    from agents import function_tool

    from .agents_helpers import make_stack, run_agent

    ran: list[Call] = []

    @function_tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order."""
        ran.append(("lookup_order", {"order_id": order_id}))
        return _results("lookup_order", {"order_id": order_id})

    @function_tool
    def get_shipping(order_id: str) -> dict:
        """Shipping details."""
        ran.append(("get_shipping", {"order_id": order_id}))
        return _results("get_shipping", {"order_id": order_id})

    @function_tool
    def search_cases(query: str) -> dict:
        """Search support cases."""
        ran.append(("search_cases", {"query": query}))
        return _results("search_cases", {"query": query})

    stack = make_stack("openinference")
    try:
        with stack.tracer.start_as_current_span("invoke_agent support"):
            _, model = run_agent([lookup_order, get_shipping, search_cases], [*turns, "done"], guard=guard)
        return Outcome(ran, model.tool_outputs(), _guard_decisions(stack.spans()))
    finally:
        stack.shutdown()


def _langchain(guard: ToolGuard, turns: list[list[Call]]) -> Outcome:
    from langchain_core.tools import tool

    from otel_loopguard.enforce.langchain import LoopGuardMiddleware

    from .lc_helpers import instrumented, model, run_agent

    ran: list[Call] = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order."""
        ran.append(("lookup_order", {"order_id": order_id}))
        return _results("lookup_order", {"order_id": order_id})

    @tool
    def get_shipping(order_id: str) -> dict:
        """Shipping details."""
        ran.append(("get_shipping", {"order_id": order_id}))
        return _results("get_shipping", {"order_id": order_id})

    @tool
    def search_cases(query: str) -> dict:
        """Search support cases."""
        ran.append(("search_cases", {"query": query}))
        return _results("search_cases", {"query": query})

    with instrumented("openllmetry") as stack:
        chat = model([*turns, "done"])
        tracer = stack.provider.get_tracer("rollout")
        with tracer.start_as_current_span("invoke_agent support"):
            run_agent(chat, [lookup_order, get_shipping, search_cases], [LoopGuardMiddleware(guard)])
        outputs = [str(m.content) for m in chat.tool_messages()]
        return Outcome(ran, outputs, _guard_decisions(stack.spans()))


ADAPTERS = {"decorator": _plain, "openai_agents": _agents, "langchain": _langchain}


@pytest.fixture(params=sorted(ADAPTERS))
def drive(request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
          ) -> Callable[[list[list[Call]]], Outcome]:
    for name in [n for n in __import__("os").environ if n.startswith("OTEL_LOOPGUARD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-no-network")
    monkeypatch.setenv("TRACELOOP_METRICS_ENABLED", "false")
    adapter = ADAPTERS[request.param]
    return lambda turns, enforce=True: adapter(_guard(tmp_path, enforce), turns)


def _times(call: Call, n: int) -> list[list[Call]]:
    return [[call] for _ in range(n)]


SEARCH = ("search_cases", {"query": "late delivery A12"})
A12 = ("lookup_order", {"order_id": "A12"})


def test_a_stop_caused_by_an_observe_only_tool_never_denies_another_tool(drive: Any) -> None:
    out = drive(_times(SEARCH, 6) + [[A12], [("get_shipping", {"order_id": "A12"})]])

    assert out.count("search_cases") == 6  # observe-only: its own loop runs, reported
    assert out.count("lookup_order") == 1 and out.count("get_shipping") == 1  # their first calls ran
    assert out.denied() == []
    blocks = [d for d in out.decisions if d[0] == "would_block"]
    assert blocks and {d[2] for d in blocks} >= {"search_cases"}
    assert blocks[0] == ("would_block", "repeat", "search_cases")  # the 5th search
    assert not [d for d in out.decisions if d[0] == "deny"]


def test_a_per_tool_cap_refuses_that_tool_only_and_the_run_goes_on(drive: Any) -> None:
    ship = [[("get_shipping", {"order_id": f"A{n}"})] for n in range(1, 4)]
    out = drive(ship + [[A12], [("lookup_order", {"order_id": "B7"})], [("get_shipping", {"order_id": "A9"})]])

    assert out.count("get_shipping") == 2  # the cap: its 3rd and 4th calls never ran
    assert out.count("lookup_order") == 2  # the other tool goes on, before and after
    assert out.denied() == [3, 6]
    assert "its 2 calls allowed" in out.outputs[2] and "stopped" not in out.outputs[2]
    denies = [d for d in out.decisions if d[0] == "deny"]
    assert denies == [("deny", "tool_cap", "get_shipping")] * 2


def test_a_run_level_stop_by_an_enforced_tool_denies_enforced_tools_only(drive: Any) -> None:
    out = drive(_times(A12, 5) + [[SEARCH], [("get_shipping", {"order_id": "B7"})], [("lookup_order", {"order_id": "C3"})]])

    assert out.count("lookup_order") == 4  # the 5th identical call is denied
    assert out.count("search_cases") == 1  # observe-only: still runs after the stop
    assert out.count("get_shipping") == 0  # enforced: denied, even its first call
    assert out.denied() == [5, 7, 8]
    assert "no further tool calls will run" in out.outputs[6]  # the run was stopped: wrap up
    assert [d[:2] for d in out.decisions if d[0] in ("deny", "would_block")] == [
        ("deny", "repeat"), ("would_block", "repeat"), ("deny", "repeat"), ("deny", "repeat")]


def test_negative_control_the_same_tools_with_new_answers_run_untouched(drive: Any) -> None:
    out = drive([[("lookup_order", {"order_id": f"A{n}"})] for n in range(6)]
                + [[("get_shipping", {"order_id": "A1"})], [("get_shipping", {"order_id": "A2"})],
                   [("search_cases", {"query": "refund"})], [("search_cases", {"query": "damaged"})]])

    assert out.denied() == [] and len(out.ran) == 10
    assert not [d for d in out.decisions if d[0] in ("deny", "would_block")]


def test_an_observe_only_guard_records_would_warn_and_would_block_and_changes_nothing(drive: Any) -> None:
    out = drive(_times(A12, 6), enforce=False)

    assert out.count("lookup_order") == 6 and out.denied() == []
    assert not any("[loop guard]" in o or "loop_guard_notice" in o for o in out.outputs)  # no nudge given
    verbs = [d[0] for d in out.decisions]
    assert verbs == ["would_warn", "would_warn", "would_block", "would_block"]  # never warn / deny


def test_after_an_observe_only_tools_stop_an_enforced_tool_is_still_denied_by_its_own_thresholds(drive: Any) -> None:
    out = drive(_times(SEARCH, 6) + _times(A12, 6) + [[("get_shipping", {"order_id": "B7"})]])

    assert out.count("search_cases") == 6
    assert out.count("lookup_order") == 4  # its own 5th identical call is denied
    assert out.count("get_shipping") == 0  # and that enforced stop now stops the run
    assert out.denied() == [11, 12, 13]
    assert [d[:2] for d in out.decisions if d[0] == "deny"] == [("deny", "repeat")] * 3
