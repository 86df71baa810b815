#!/usr/bin/env python
"""Benchmark of the in-process processor against a BatchSpanProcessor-only setup.

    .venv/bin/python bench/bench_processor.py [--json]
    .venv/bin/python bench/bench_processor.py --callgrind   # instructions per plain span (valgrind)

Both setups export to a do-nothing exporter in the same process, so only
tracing cost is measured:
1. application thread, per span: time from span start to `end()` returning,
   for tool spans (GenAI conventions, small arguments, in runs of 50 calls; and a
   run past its stop, whose every later call is marked would_block) and for plain
   spans;
2. total CPU per span (process time, which includes the worker thread that
   fingerprints, judges and tags), after a flush.
Figures are reported next to the baseline; nothing asserts on time.

--callgrind counts instead of timing (this machine's speed drifts, instruction counts do not):
under valgrind --tool=callgrind, the application thread's instructions for the same spans with
and without install() (after a warm-up; setup not counted); instructions per span = difference
/ spans. They are converted to µs by the baseline's time per span (timed in this run, outside
valgrind) over its instructions per span. PYTHONPATH, when set, says which checkout's otel_loopguard is measured (an older commit's
worktree, say); else the checkout this script is in.
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
# another checkout, whose code would then be measured instead. PYTHONPATH, ahead of both, wins.
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import otel_loopguard
from otel_loopguard.processor import install


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _provider(guarded: bool, quiet: bool = False) -> TracerProvider:
    """quiet: the batch processor's thread exports only when flushed, so it never takes the GIL
    from the application thread while spans are made (--callgrind: no count hangs on timing)."""
    tp = TracerProvider()
    batch = {"schedule_delay_millis": 3_600_000, "max_export_batch_size": 100_000} if quiet else \
        {"schedule_delay_millis": 50}
    tp.add_span_processor(BatchSpanProcessor(NullExporter(), max_queue_size=100_000, **batch))
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


def measure(kind: str, guarded: bool, n: int, quiet: bool = False) -> dict[str, float]:
    tp = _provider(guarded, quiet)
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


def best_pair(kind: str, n: int, repeats: int, quiet: bool = False) -> tuple[dict[str, float], dict[str, float]]:
    """Baseline and guarded measured alternately, best of `repeats` each: a machine whose
    speed drifts during the run (frequency, neighbours) then drifts for both alike."""
    base, ours = [], []
    for _ in range(repeats):
        base.append(measure(kind, False, n, quiet))
        ours.append(measure(kind, True, n, quiet))
    return ({k: min(r[k] for r in base) for k in base[0]}, {k: min(r[k] for r in ours) for k in ours[0]})


# -- instruction counts: valgrind --tool=callgrind, the same work with and without install() --

# Only the spans are counted: callgrind collects inside sys.call_tracing alone (a C function
# nothing else here calls), on the application thread, after a warm-up, with the cyclic GC
# off (when a collection falls depends on the whole heap: it would swing the count by more
# than a span costs). Imports, install() and the warm-up are not counted.
_CHILD = """
import gc, sys; sys.path.insert(0, {bench!r})
import bench_processor as b
tp = b._provider({guarded}, quiet=True)
b.{work}(tp, {warm})
gc.collect(); gc.freeze(); gc.disable()
sys.call_tracing(b.{work}, (tp, {n}))
gc.enable()
tp.force_flush()
tp.shutdown()
"""
WORK = {"plain": "_plain_spans", "tool": "_tool_spans"}


def _instructions(kind: str, guarded: bool, n: int, warm: int, seed: int) -> int:
    from valgrind_count import instructions  # bench/, beside this script (run as one: --callgrind)

    code = _CHILD.format(bench=str(Path(__file__).resolve().parent), guarded=guarded, work=WORK[kind], n=n, warm=warm)
    return instructions(code, options=["--collect-atstart=no", "--toggle-collect=sys_call_tracing*"],
                        env={"PYTHONHASHSEED": str(seed)}, thread=1)  # the worker threads' counts are left out


def callgrind(kind: str, spans: int, warm: int, repeats: int, seeds: int) -> dict[str, Any]:
    """Instructions per span on the application thread, baseline and guarded, and the added
    instructions in µs at the baseline's own time per instruction (timed here, best of
    `repeats`, outside valgrind). Each count under `seeds` hash seeds: the heap's layout moves
    a span's count by a few hundred instructions, the same way for a whole process."""
    counts = {guarded: [_instructions(kind, guarded, spans, warm, seed) / spans for seed in range(seeds)]
              for guarded in (False, True)}
    added = [ours - base for base, ours in zip(counts[False], counts[True])]
    baseline = sum(counts[False]) / seeds
    timed, _ = best_pair(kind, spans, repeats, quiet=True)
    us_per_instruction = timed["app_us"] / baseline
    mean = sum(added) / seeds
    return {"spans": spans, "seeds": seeds, "baseline_instructions": round(baseline),
            "guarded_instructions": round(sum(counts[True]) / seeds), "added_instructions": round(mean),
            "added_instructions_range": [round(min(added)), round(max(added))],
            "baseline_app_us": round(timed["app_us"], 2), "ns_per_instruction": round(us_per_instruction * 1000, 4),
            "added_app_us": round(mean * us_per_instruction, 3),
            "added_app_us_range": [round(min(added) * us_per_instruction, 3), round(max(added) * us_per_instruction, 3)]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--spans", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions per plain span on the application thread, under valgrind (slow)")
    parser.add_argument("--callgrind-kinds", nargs="+", choices=sorted(WORK), default=["plain"])
    parser.add_argument("--callgrind-seeds", type=int, default=3, help="hash seeds each count is made under")
    args = parser.parse_args()
    if args.callgrind:
        _report_callgrind(args)
        return
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


def _report_callgrind(args: argparse.Namespace) -> None:
    result: dict[str, Any] = {"python": platform.python_version(), "measured": str(Path(otel_loopguard.__file__).parent)}
    for kind in args.callgrind_kinds:
        result[kind] = callgrind(kind, args.spans, warm=args.spans, repeats=args.repeats, seeds=args.callgrind_seeds)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"python {result['python']}, {result['measured']}; callgrind, application thread, {args.spans} spans "
          f"(after as many warm-up spans); us from the baseline's time per instruction, best of {args.repeats}")
    for kind in args.callgrind_kinds:
        r = result[kind]
        low, high = r["added_app_us_range"]
        print(f"{LABELS[kind]:24}: instructions {r['baseline_instructions']:,} -> {r['guarded_instructions']:,} "
              f"({r['added_instructions']:+,}, {r['seeds']} seeds: {r['added_instructions_range']}); baseline "
              f"{r['baseline_app_us']:.2f} us = {r['ns_per_instruction']} ns/instruction: {r['added_app_us']:+.3f} us "
              f"({low:+.3f} to {high:+.3f})")


if __name__ == "__main__":
    main()
