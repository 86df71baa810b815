"""Shared scenarios for the per-framework capture scripts (issue 30): pai_run.py, adk_run.py,
crew_run.py, smol_run.py, li_run.py. Built on common.py (span recording and dumping).

Every script plays the same scenarios with the framework's scripted/test model (no network):

  healthy   lookup_order(A-1); get_shipping(A-1); lookup_order(B-2); "done"        (3 calls, quiet)
  repeat    lookup_order(A-1) in 5 model turns; "done"                             (repeat/stop)
  pingpong  lookup_order(A-1), get_shipping(A-1), alternating, 6 turns; "done"     (cycle/stop)
  errors    flaky_tool(x=1, mode=fast) in 4 turns, each raises; "done"             (error_streak/stop)
  parallel  turn 1: lookup_order(A-1) + lookup_order(B-2); turn 2: lookup_order(A-1) twice; "done"
                                                                                 (parallel_duplicate/info only)
and, where the framework has them, handoffs/sub-agents (each script says which).

Each capture's meta carries `expected`: the label written BEFORE auditing, i.e. what a correct
product must find (tool calls, and the findings that must / must not be raised).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# Captures of this issue live beside captures/, not in it: every file under captures/ is read by
# tests (tests/calibrate/test_captured_recall.py pins the findings of each one; tests/receiver/
# test_decode.py wants tool and model spans recognised in each). Moving them in is issue 30 item 2.
FW_CAPTURES = os.environ.get("FW_CAPTURES") or os.path.join(common.HERE, "fw_captures")

# No network: every script imports this module before its framework. Connections to anything but
# loopback are refused and recorded in the capture's meta (`blocked_connections`).
BLOCKED: list[str] = []
_connect = socket.socket.connect


def _guard(self, address):  # noqa: ANN001
    if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
        BLOCKED.append(f"{address[0]}:{address[1]}")
        raise OSError(f"research socket guard: no network ({address[0]})")
    return _connect(self, address)


socket.socket.connect = _guard

A1 = {"order_id": "A-1"}
B2 = {"order_id": "B-2"}
BAD = {"x": 1, "mode": "fast"}

# scenario -> list of turns; a turn is a list of (call_id, tool, args) or the final answer (str)
SCENARIOS: dict[str, list[Any]] = {
    "healthy": [[("c1", "lookup_order", A1)], [("c2", "get_shipping", A1)], [("c3", "lookup_order", B2)], "done"],
    "repeat": [[(f"c{i}", "lookup_order", A1)] for i in range(1, 6)] + ["done"],
    "pingpong": [[(f"c{i}", "lookup_order" if i % 2 else "get_shipping", A1)] for i in range(1, 7)] + ["done"],
    "errors": [[(f"c{i}", "flaky_tool", BAD)] for i in range(1, 5)] + ["done"],
    "parallel": [[("c1a", "lookup_order", A1), ("c1b", "lookup_order", B2)],
                 [("c2a", "lookup_order", A1), ("c2b", "lookup_order", A1)], "done"],
}

# What a correct product must find. must: findings (kind/severity [tool]) that must be raised;
# quiet: no warn or stop finding at all. Written before any audit was run.
EXPECTED: dict[str, dict[str, Any]] = {
    "healthy": {"tool_calls": 3, "errors": 0, "must": [], "quiet": True},
    "repeat": {"tool_calls": 5, "errors": 0, "must": ["repeat/stop lookup_order"], "quiet": False},
    "pingpong": {"tool_calls": 6, "errors": 0, "must": ["cycle/stop"], "quiet": False},
    "errors": {"tool_calls": 4, "errors": 4, "must": ["error_streak/stop flaky_tool"], "quiet": False},
    "parallel": {"tool_calls": 4, "errors": 0, "must": ["parallel_duplicate/info lookup_order"], "quiet": True},
}

USAGE = [(100 + 10 * i, 7 + i) for i in range(20)]  # (input, output) tokens of model turn i


# --content off: each instrumentation's own switch for tool arguments/results and messages.
CONTENT_OFF_ENV = {
    "openinference": {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"},
    "traceloop": {"TRACELOOP_TRACE_CONTENT": "false"},
}


def content_off(family: str) -> dict[str, str]:
    """Set the content switch of an instrumentation family (before it is imported); returns it."""
    env = CONTENT_OFF_ENV.get(family, {})
    os.environ.update(env)
    return env


def out_name(base: str, content: str) -> str:
    return base if content == "default" else f"{base}__content-{content}"


def lookup_order(order_id: str) -> str:
    return f"order {order_id}: pending"


def get_shipping(order_id: str) -> str:
    return f"order {order_id}: ships tomorrow"


def flaky(x: int, mode: str) -> str:
    raise RuntimeError(f"flaky_tool exploded on x={x}")


class Script:
    """Hands out the scenario's turns in order, to whatever scripted model the framework has."""

    def __init__(self, turns: list[Any]) -> None:
        self.turns = list(turns)
        self.i = 0

    def next(self) -> tuple[int, Any, tuple[int, int]]:
        i = self.i
        self.i += 1
        if i >= len(self.turns):  # the framework asked for more turns than scripted: answer
            return i, "done", USAGE[min(i, len(USAGE) - 1)]
        return i, self.turns[i], USAGE[min(i, len(USAGE) - 1)]


def setup(extra_processors: tuple = ()):
    """common.setup() with processors that must run before the exporter (OpenInference's
    Pydantic AI processor rewrites attributes at on_end)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    recorder = common.StartRecorder()
    provider.add_span_processor(recorder)
    for p in extra_processors:
        provider.add_span_processor(p)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    install_loopguard(provider)
    return provider, exporter, recorder


def install_loopguard(provider) -> None:
    """With FW_LOOPGUARD_KEY set (tests/frameworks/test_more_frameworks.py), the run goes
    through `otel_loopguard.install()` as an application's would: every exported span is the
    processor's tagged copy. FW_LOOPGUARD_POLICY names a policy file."""
    key = os.environ.get("FW_LOOPGUARD_KEY")
    if not key:
        return
    import otel_loopguard

    otel_loopguard.install(tracer_provider=provider, key=key, policy=os.environ.get("FW_LOOPGUARD_POLICY") or None)


def script_json(turns: list[Any]) -> list[Any]:
    return [t if isinstance(t, str) else [[c, n, a] for c, n, a in t] for t in turns]


def finish(name: str, provider, exporter, recorder, *, scenario: str, turns: list[Any], expected: dict[str, Any],
           versions: list[str], outcome: str, final: Any, t_import, t_run, extra: dict[str, Any] | None = None) -> None:
    provider.force_flush()
    meta = {
        "combo": name.split("__")[0], "scenario": scenario,
        "env": {k: v for k, v in os.environ.items()
                if k.startswith(("OPENINFERENCE_", "OTEL_", "TRACELOOP_", "CREWAI_", "ADK_", "SMOLAGENTS_",
                                 "GOOGLE_GENAI", "LLAMA"))},
        "python": common.python_version(),
        "versions": common.versions(["opentelemetry-sdk", "opentelemetry-api"] + versions),
        "final_output": None if final is None else str(final)[:500], "outcome": outcome,
        "import_seconds": t_import.seconds, "run_seconds": t_run.seconds,
        "script": script_json(turns), "expected": expected, "blocked_connections": BLOCKED, **(extra or {}),
    }
    rows = common.dump(os.path.join(FW_CAPTURES, name + ".json"), exporter, recorder, meta)
    if BLOCKED:
        print(f"  blocked connections: {BLOCKED}")
    print(f"{name}: {len(rows)} spans, run {t_run.seconds}s, final={str(final)[:60]!r}, outcome={outcome[:200]}")
    tree = common.tree(rows)
    with open(os.path.join(FW_CAPTURES, name + ".tree.txt"), "w") as f:
        f.write(tree + "\n")
    if os.environ.get("FW_VERBOSE"):
        print(tree)


def run_guarded(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except BaseException as e:  # noqa: BLE001 - the capture records how the run ended
        if isinstance(e, KeyboardInterrupt):
            raise
        return f"raised {type(e).__name__}: {e}", None


def dumps(a: dict) -> str:
    return json.dumps(a)
