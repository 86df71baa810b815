"""What the enforce drivers share (<fw>_enforce_agent.py SCENARIO OUT.pb [INSTRUMENTATION]).

Imported by the drivers only, in .venv-fw and .venv-adk. The scenarios (the ADK and Pydantic AI
drivers take the first five and `four`, the mutation check: four identical calls, which the
guard must let run):

  repeat        lookup_order(A-1) eight times, then "done": the fifth is denied
  healthy       lookup_order(A-1), get_shipping(A-1), lookup_order(B-2), "done"
  observe_tool  as repeat, with lookup_order observe-only in the policy
  kill_switch   as repeat, with the process switched to observe (otel_loopguard.set_mode)
  observe       as repeat, with an observe-only guard (otel_loopguard.guard(mode="observe"))
  four          lookup_order(A-1) four times, then "done"
  errors        flaky_tool(x=1..8), which raises each time, then "done": failures are recorded
  parallel      one model response asking lookup_order(A-1) five times, then "done": siblings

The tools append (name, arguments) to `invoked` when their body runs. The report is one JSON
line: {"invoked", "requests": [{"tools", "told": the request's last instruction, "returns":
the tool results it carries}...], "final"}; the spans go to OUT.pb (OTLP protobuf).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

from otel_loopguard.enforce.guard import WRAP_UP

SCENARIOS = ("repeat", "healthy", "observe_tool", "kill_switch", "observe", "four", "errors", "parallel")
A1, B2 = {"order_id": "A-1"}, {"order_id": "B-2"}
__all__ = ["WRAP_UP", "SCENARIOS", "arguments", "setup", "scenario_guard", "script", "step", "report", "lookup_order", "get_shipping",
           "flaky_tool"]


def arguments(argv: list, name: str, instrumentations: tuple = ("openinference",),
              scenarios: tuple = SCENARIOS) -> tuple[str, str, str]:
    """SCENARIO OUT.pb [INSTRUMENTATION]: the first of `instrumentations` by default."""
    if len(argv) not in (2, 3) or argv[0] not in scenarios or argv[2:3] and argv[2] not in instrumentations:
        print(f"usage: {name} {{{','.join(scenarios)}}} OUT.pb [{'|'.join(instrumentations)}]", file=sys.stderr)
        raise SystemExit(2)
    return argv[0], argv[1], argv[2] if len(argv) == 3 else instrumentations[0]


def script(scenario: str) -> list:
    if scenario == "healthy":
        return [[("lookup_order", A1)], [("get_shipping", A1)], [("lookup_order", B2)], "done"]
    if scenario == "parallel":
        return [[("lookup_order", A1)] * 5, "done"]
    if scenario == "errors":
        return [[("flaky_tool", {"x": i, "mode": "fast"})] for i in range(1, 9)] + ["done"]
    return [[("lookup_order", A1)] for _ in range(4 if scenario == "four" else 8)] + ["done"]


def step(turns: list, requests: list) -> Any:
    """The scripted turn for the request just recorded (wrap-up requests are not counted)."""
    played = sum(1 for r in requests if r["told"] != WRAP_UP)
    return turns[min(played - 1, len(turns) - 1)]


def setup(scenario: str, key: str, processors: tuple = ()) -> tuple[Any, Any, Any, list, list]:
    """The tracer provider with install() and an in-memory exporter (after `processors`: OpenInference's
    Pydantic AI processor rewrites the spans at their end), and the scenario's guard."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_loopguard

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    for processor in processors:
        provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel_loopguard.install(tracer_provider=provider, key=key)
    return provider, exporter, scenario_guard(scenario, key), [], []


def scenario_guard(scenario: str, key: str) -> Any:
    """An enforcing guard; `observe_tool`: lookup_order observe-only in the policy;
    `kill_switch`: the process switched to observe; `observe`: an observe-only guard."""
    import otel_loopguard

    policy = None
    if scenario == "observe_tool":
        policy = os.path.join(tempfile.mkdtemp(), "policy.yaml")
        with open(policy, "w") as f:
            f.write("tools: {lookup_order: {enforce: false}}\n")
    guard = otel_loopguard.guard(key=key, policy=policy, mode="observe" if scenario == "observe" else "enforce")
    if scenario == "kill_switch":
        otel_loopguard.set_mode("observe")
    return guard


def lookup_order(invoked: list, order_id: str) -> str:
    invoked.append(("lookup_order", {"order_id": order_id}))
    return f"order {order_id}: pending"


def get_shipping(invoked: list, order_id: str) -> str:
    invoked.append(("get_shipping", {"order_id": order_id}))
    return f"order {order_id}: ships tomorrow"


def flaky_tool(invoked: list, x: int, mode: str) -> str:
    invoked.append(("flaky_tool", {"x": x, "mode": mode}))
    raise RuntimeError(f"upstream timeout ({mode} #{x})")


def report(provider: Any, exporter: Any, out_path: str, invoked: list, requests: list, final: str) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    provider.force_flush()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    with open(out_path, "wb") as f:
        f.write(encode_spans(spans).SerializeToString())
    print(json.dumps({"invoked": invoked, "requests": requests, "final": final}))
