#!/usr/bin/env python
"""Benchmark of the in-process processor against a BatchSpanProcessor-only setup.

    .venv/bin/python bench/bench_processor.py [--json]

Both setups export to a do-nothing exporter in the same process, so only
tracing cost is measured:
1. application thread, per span: time from span start to `end()` returning,
   for tool spans (GenAI conventions, small arguments, in runs of 50 calls; and a
   run past its stop, whose every later call is marked would_block) and for plain
   spans;
2. total CPU per span (process time, which includes the worker thread that
   fingerprints, judges and tags), after a flush.
Figures are reported next to the baseline; nothing asserts on time.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Sequence

# The checkout this script is in, before any installed copy: an editable install may point at
# another checkout, whose code would then be measured instead.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_loopguard.processor import install


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _provider(guarded: bool) -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(NullExporter(), max_queue_size=100_000, schedule_delay_millis=50))
    if guarded:
        install(tracer_provider=tp, key=b"bench-key-0123456789", mode="observe")
    return tp


# "tool": 50 distinct arguments in turn and one result, as a run that keeps coming back to
# the same calls; "tool, all distinct": every call's arguments and result differ (no
# payload repeats, so the fingerprint memo never helps).
# "tool span": every run makes the same 50 calls, each with its own result: no loop, but the
# payload texts recur from run to run (the fingerprint memo answers). "all distinct": no text
# ever recurs. "stopped run": one long run of distinct calls, past its tool-call budget.
ARGS = [json.dumps({"order_id": f"A{i}", "include_items": True, "limit": 10}) for i in range(50)]
RESULTS = [json.dumps({"status": "delivered", "version": i}) for i in range(50)]
DISTINCT_ARGS = [json.dumps({"order_id": f"A{i}", "include_items": True, "limit": 10}) for i in range(100_000)]
DISTINCT_RESULTS = [json.dumps({"status": "delivered", "version": i}) for i in range(100_000)]


RUN_CALLS = 50  # calls per run (trace): below the default budget of 60 tool calls


def _tool_spans(tp: TracerProvider, n: int, distinct: bool = False, run_calls: int = RUN_CALLS) -> float:
    """Tool spans in runs of `run_calls` calls, each run a trace of its own."""
    tracer = tp.get_tracer("bench")
    args = DISTINCT_ARGS if distinct else ARGS
    results = DISTINCT_RESULTS if distinct else RESULTS
    app = 0.0
    for first in range(0, n, run_calls):
        with tracer.start_as_current_span("agent"):
            for i in range(first, min(n, first + run_calls)):
                t0 = time.perf_counter()
                span = tracer.start_span("execute_tool lookup_order")
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "lookup_order")
                span.set_attribute("gen_ai.tool.call.arguments", args[i % len(args)])
                span.set_attribute("gen_ai.tool.call.result", results[i % len(results)])
                span.end()
                app += time.perf_counter() - t0
    return app


def _plain_spans(tp: TracerProvider, n: int) -> float:
    tracer = tp.get_tracer("bench")
    app = 0.0
    for i in range(n):
        t0 = time.perf_counter()
        span = tracer.start_span("chain step")
        span.set_attribute("app.step", i)
        span.set_attribute("app.flow", "support")
        span.end()
        app += time.perf_counter() - t0
    return app


KINDS = ("tool", "distinct", "stopped", "plain")
LABELS = {"tool": "tool span", "distinct": "tool span, all distinct", "plain": "plain span",
          "stopped": "tool span of a stopped run"}


def measure(kind: str, guarded: bool, n: int) -> dict[str, float]:
    tp = _provider(guarded)
    gc.collect()
    cpu0 = time.process_time()
    if kind == "plain":
        app = _plain_spans(tp, n)
    elif kind == "stopped":  # one run of all n calls: past its budget, each call is marked would_block
        app = _tool_spans(tp, n, distinct=True, run_calls=n)
    else:
        app = _tool_spans(tp, n, distinct=kind == "distinct")
    tp.force_flush()
    cpu = time.process_time() - cpu0
    tp.shutdown()
    return {"app_us": app / n * 1e6, "cpu_us": cpu / n * 1e6}


def best_pair(kind: str, n: int, repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """Baseline and guarded measured alternately, best of `repeats` each: a machine whose
    speed drifts during the run (frequency, neighbours) then drifts for both alike."""
    base, ours = [], []
    for _ in range(repeats):
        base.append(measure(kind, False, n))
        ours.append(measure(kind, True, n))
    return ({k: min(r[k] for r in base) for k in base[0]}, {k: min(r[k] for r in ours) for k in ours[0]})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--spans", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    result: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    for kind in KINDS:
        base, ours = best_pair(kind, args.spans, args.repeats)
        result[kind] = {
            "baseline_app_us": round(base["app_us"], 2),
            "guarded_app_us": round(ours["app_us"], 2),
            "added_app_us": round(ours["app_us"] - base["app_us"], 2),
            "baseline_cpu_us": round(base["cpu_us"], 2),
            "guarded_cpu_us": round(ours["cpu_us"], 2),
            "added_cpu_us": round(ours["cpu_us"] - base["cpu_us"], 2),
            "app_ratio": round(ours["app_us"] / base["app_us"], 2),
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"python {result['python']}, {result['cpus']} cpus, {args.spans} spans per measurement, "
          f"best of {args.repeats}, baseline and guarded interleaved")
    for kind in KINDS:
        r = result[kind]
        print(f"{LABELS[kind]:24}: app thread {r['baseline_app_us']:.2f} -> {r['guarded_app_us']:.2f} us "
              f"({r['added_app_us']:+.2f} us, {r['app_ratio']}x); total CPU {r['baseline_cpu_us']:.2f} -> "
              f"{r['guarded_cpu_us']:.2f} us ({r['added_cpu_us']:+.2f} us)")


if __name__ == "__main__":
    main()
