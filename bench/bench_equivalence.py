#!/usr/bin/env python
"""Benchmark of equivalence (issue 26): the added CPU per tool call, beside today's path.

    .venv/bin/python bench/bench_equivalence.py          # table
    .venv/bin/python bench/bench_equivalence.py --json   # machine-readable

What the processor's worker (and the receiver, the audit) does per tool call is
`fingerprint_call` then `Run.observe`. Both are timed here on the same calls under two
policies in the same process: the built-in one (equivalence on: shape digest, items, sketch,
reported failures) and the same policy with equivalence off for every tool (exactly today's
path: `NO_EQUIVALENCE`, no extra parse). The ratio is what compares across machines.
Payloads: a small JSON answer, a 20-line shell output with noise, 10 search hits, a
200-line file read. Then the whole processor: CPU per tool span (application thread and
worker together, the span copy and the SDK included) with a mix of the four, the built-in
policy against one that exempts the four tools. Nothing here asserts on time; figures go to
docs/performance.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

# The checkout this script is in, before any installed copy: an editable install may point at
# another checkout, whose code would then be measured instead.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otel_loopguard.calls import RawCall
from otel_loopguard.canon import load_key
from otel_loopguard.detect.run import Run
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
from otel_loopguard.policy import Policy
from otel_loopguard.policy.model import EXACT_ONLY

CALLS = 400
REPEATS = 5
KEY = load_key(key=b"bench-equivalence-key-0123456789")


def _payloads(i: int) -> list[tuple[str, str, str]]:
    """(tool, arguments JSON, result text) of one call of each kind."""
    small = json.dumps({"order_id": f"A{i}", "status": "shipped", "version": i % 7})
    shell = "\n".join(f"2026-12-06 06:40:{k:02d}.{i % 1000:03d} INFO [pid {4000 + i}] step {k} took {k * 3 + i}ms"
                      for k in range(20))
    hits = json.dumps([{"url": f"https://example.org/{i}/{k}", "title": f"Result {k} for {i}",
                        "snippet": "a few words about the page " * 3} for k in range(10)])
    file = "\n".join(f"{n:5d}  line {n} of file {i}: some source text here" for n in range(200))
    return [
        ("lookup_order", json.dumps({"order_id": f"A{i}"}), small),
        ("run_shell", json.dumps({"command": f"make target-{i}"}), json.dumps({"exit_code": i % 2, "stdout": shell})),
        ("web_search", json.dumps({"query": f"how to configure thing number {i} quickly"}), hits),
        ("read_file", json.dumps({"path": f"src/file_{i}.py", "offset": 0, "limit": 200}), file),
    ]


def _raws(kind: int) -> list[RawCall]:
    return [RawCall(seq=i + 1, tool=p[0], arguments=p[1], result=p[2], span_id=f"{i:016x}")
            for i in range(CALLS) for p in (_payloads(i)[kind],)]


def _best(fn: Callable[[], Any]) -> float:
    best = float("inf")
    gc.disable()
    try:
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    finally:
        gc.enable()
    return best


def _fingerprint_us(policy: Policy, raws: list[RawCall]) -> float:
    def once() -> None:
        fp = Fingerprinter(KEY, policy)  # a new one each time: no memo carried over
        for raw in raws:
            fingerprint_call(raw, fp)
    return _best(once) / len(raws) * 1e6


def _observe_us(policy: Policy, raws: list[RawCall]) -> float:
    fp = Fingerprinter(KEY, policy)
    calls = [fingerprint_call(r, fp) for r in raws]

    def once() -> None:
        run = Run("bench", policy)
        for c in calls:
            run.observe(c)
    return _best(once) / len(calls) * 1e6


def _span_cpu_us(policy_file: str, spans: int) -> float:
    """CPU per tool span through a real TracerProvider with the processor installed."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_loopguard.processor import install

    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    install(tracer_provider=tp, key="bench-equivalence-key-0123456789", policy=policy_file)
    tracer = tp.get_tracer("bench")
    gc.collect()
    cpu0 = time.process_time()
    for i in range(spans):
        if i % 20 == 0:
            root = tracer.start_span("agent")  # a run of 20 calls
        tool, args, result = _payloads(i)[i % 4]
        with tracer.start_as_current_span(f"execute_tool {tool}", context=_context(root)) as span:
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                 "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": result})
        if i % 20 == 19:
            root.end()
    tp.force_flush()
    cpu = time.process_time() - cpu0
    tp.shutdown()
    return cpu / spans * 1e6


def _context(span: Any) -> Any:
    from opentelemetry import trace

    return trace.set_span_in_context(span)


def processor(spans: int = 800, repeats: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        on, off = f"{folder}/on.yaml", f"{folder}/off.yaml"
        Path(on).write_text("version: bench-on\n", encoding="utf-8")
        Path(off).write_text("version: bench-off\nequivalence: {exempt_tools: [lookup_order, run_shell, web_search, "
                             "read_file]}\n", encoding="utf-8")
        base, ours = [], []
        for _ in range(repeats):  # alternately: a drifting machine drifts for both alike
            base.append(_span_cpu_us(off, spans))
            ours.append(_span_cpu_us(on, spans))
    b, o = min(base), min(ours)
    return {"cpu_us_per_span": round(b, 1), "cpu_us_per_span_eq": round(o, 1), "ratio": round(o / b, 2),
            "added_us": round(o - b, 1)}


def measure(calls: int = CALLS) -> list[dict[str, Any]]:
    on = Policy()
    off = dataclasses.replace(on, equivalence=EXACT_ONLY)
    rows = []
    for kind, name in enumerate(("small json", "shell output", "search hits", "file read 200 lines")):
        raws = _raws(kind)[:calls]
        base_fp, eq_fp = _fingerprint_us(off, raws), _fingerprint_us(on, raws)
        base_obs, eq_obs = _observe_us(off, raws), _observe_us(on, raws)
        rows.append({
            "payload": name,
            "fingerprint_us": round(base_fp, 2), "fingerprint_eq_us": round(eq_fp, 2),
            "observe_us": round(base_obs, 2), "observe_eq_us": round(eq_obs, 2),
            "per_call_ratio": round((eq_fp + eq_obs) / (base_fp + base_obs), 2),
            "added_us": round(eq_fp + eq_obs - base_fp - base_obs, 2),
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure()
    spans = processor()
    if args.json:
        json.dump({"python": sys.version.split()[0], "rows": rows, "processor": spans}, sys.stdout, indent=2)
        print()
        return
    print(f"{'payload':<22}{'fingerprint us':>16}{'+ equivalence':>15}{'observe us':>12}{'+ equivalence':>15}"
          f"{'ratio':>8}{'added us':>10}")
    for r in rows:
        print(f"{r['payload']:<22}{r['fingerprint_us']:>16}{r['fingerprint_eq_us']:>15}{r['observe_us']:>12}"
              f"{r['observe_eq_us']:>15}{r['per_call_ratio']:>8}{r['added_us']:>10}")
    print(f"\nprocessor, CPU per tool span (the mix of the four): {spans['cpu_us_per_span']} us -> "
          f"{spans['cpu_us_per_span_eq']} us with equivalence ({spans['ratio']}x, {spans['added_us']:+} us)")


if __name__ == "__main__":
    main()
