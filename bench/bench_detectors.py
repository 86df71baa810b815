#!/usr/bin/env python
"""Benchmark of the pure core: detector cost per call, fingerprint cost, memory per run.

    .venv/bin/python bench/bench_detectors.py          # table
    .venv/bin/python bench/bench_detectors.py --json   # machine-readable

Every timing is reported next to a baseline measured in the same process, so the
ratios (not the nanoseconds) are what compares across machines. Nothing here
asserts on time; see docs/performance.md for how to read the figures.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import itertools
import json
import math
import os
import platform
import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

try:
    import otel_loopguard  # noqa: F401  (installed, usually editable)
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# fingerprint first: importing otel_loopguard.detect (or .progress) before it
# currently fails on a circular import (progress -> fingerprint -> progress).
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call, load_key  # isort: skip
from otel_loopguard.calls import RawCall, ToolCall
from otel_loopguard.detect.run import Run
from otel_loopguard.policy import Policy, policy_from_mapping

SIZES = (1_000, 10_000, 100_000)
# More repeats for small runs: their totals are short and noisier.
REPEATS = {1_000: 40, 10_000: 8, 100_000: 3}
MEMORY_CHECKPOINTS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
FINGERPRINT_CALLS = 2_000
FINGERPRINT_REPEATS = 5

# One tool of each kind the detectors treat specially; everything else uses defaults.
POLICY_DATA: dict[str, Any] = {
    "version": "bench-1",
    "tools": {
        "list_items": {  # a declared progress rule: new item ids are progress
            "progress": {"items_field": "items", "item_id_field": "id", "cursor_field": "cursor"}
        },
        "send_email": {"side_effect": True, "idempotency_key": "idempotency_key"},
        "job_status": {  # a poller with a terminal state
            "poll": {"max_polls": 20},
            "progress": {"state_field": "status", "terminal_states": ["done", "failed"]},
        },
    },
}


def fingerprinter(policy: Policy) -> Fingerprinter:
    return Fingerprinter(load_key(key=b"k" * 32), policy)


# --------------------------------------------------------------------------- workload


def workload(n: int, seed: int = 20240601) -> Iterator[RawCall]:
    """A deterministic, realistic stream of `n` tool calls (JSON text, as spans carry it).

    Per model decision (turn), roughly: 62% one new `search`; 6% the previous
    search again (same arguments and result); 10% 2-4 parallel `fetch_url`
    siblings (sometimes one duplicated); 5% a failing `fetch_url`; 6% the next
    page of `list_items` (progress rule); 3% `send_email` (side effect with an
    idempotency key, sometimes retried with the same key); 8% a `job_status` poll.
    """
    rng = random.Random(seed)
    seq = 0
    turn = 0
    clock = 1_700_000_000_000_000_000
    last_search: tuple[dict[str, Any], dict[str, Any]] | None = None
    job, polls, job_len = 0, 0, rng.randint(3, 12)
    listing, page = 0, 0
    email, last_email = 0, None

    while seq < n:
        turn += 1
        r = rng.random()
        batch: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = []
        if r < 0.62 or (r < 0.68 and last_search is None):
            q = f"quarterly revenue {seq} {rng.randrange(10**6)}"
            args = {
                "query": q,
                "limit": 10,
                "lang": "en",
                "safe": True,
                "filters": {"site": f"site{seq % 97}.example.com"},
            }
            res = {
                "hits": [{"title": f"{q} #{k}", "url": f"https://e.example/{seq}/{k}"} for k in range(3)],
                "total": rng.randrange(1000),
                "request_id": f"req-{seq}",
            }
            last_search = (args, res)
            batch.append(("search", args, res, True))
        elif r < 0.68:
            args, res = last_search  # type: ignore[misc]
            batch.append(("search", args, {**res, "request_id": f"req-{seq}"}, True))
        elif r < 0.78:
            urls = [f"https://docs.example/{seq}/{k}" for k in range(rng.randint(2, 4))]
            if rng.random() < 0.1:
                urls.append(urls[0])  # a duplicated sibling
            for u in urls:
                batch.append(("fetch_url", {"url": u, "timeout": 10, "follow": True,
                                            "headers": {"accept": "text/html"}, "max_bytes": 65536},
                              {"status": 200, "length": rng.randrange(10**5), "etag": f"{seq}-{u}"}, True))
        elif r < 0.83:
            u = f"https://flaky.example/{rng.randrange(50)}"
            batch.append(("fetch_url", {"url": u, "timeout": 10, "follow": True,
                                        "headers": {"accept": "text/html"}, "max_bytes": 65536},
                          {"error": "timeout", "status": 504}, False))
        elif r < 0.89:
            if page >= 8:
                listing, page = listing + 1, 0
            page += 1
            cursor = None if page == 1 else f"c{listing}-{page}"
            items = [{"id": f"L{listing}-{page}-{k}", "name": f"item {k}"} for k in range(5)]
            batch.append(("list_items", {"collection": f"col{listing}", "cursor": cursor,
                                         "page_size": 5, "order": "asc", "fields": ["id", "name"]},
                          {"items": items, "next": f"c{listing}-{page + 1}"}, True))
        elif r < 0.92:
            if last_email is not None and rng.random() < 0.2:
                args = last_email  # a retry that reuses its idempotency key
            else:
                email += 1
                args = {"to": f"user{email}@example.com", "subject": f"Report {email}",
                        "body": "Please find the report attached.", "cc": [],
                        "idempotency_key": f"idem-{email}"}
                last_email = args
            batch.append(("send_email", args, {"id": f"msg-{seq}", "queued": True}, True))
        else:
            polls += 1
            status = "done" if polls >= job_len else "running"
            batch.append(("job_status", {"job_id": f"job-{job}", "verbose": False},
                          {"status": status, "progress": polls}, True))
            if status == "done":
                job, polls, job_len = job + 1, 0, rng.randint(3, 12)

        for tool, args, res, ok in batch:
            if seq >= n:
                break
            clock += rng.randint(50, 900) * 1_000_000
            yield RawCall(
                seq=seq,
                tool=tool,
                arguments=json.dumps(args),
                result=json.dumps(res),
                ok=ok,
                turn=turn,
                call_id=f"call_{seq}",
                span_id=f"{seq:016x}",
                start_ns=clock,
                end_ns=clock + 40_000_000,
            )
            seq += 1


# --------------------------------------------------------------------------- timing


def _best_ns(fn: Callable[[], None], repeats: int) -> int:
    """Best wall time of `repeats` runs of fn, garbage collector off (as timeit does)."""
    best = math.inf
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            fn()
            t = time.perf_counter_ns() - t0
            best = min(best, t)
    finally:
        if enabled:
            gc.enable()
    return int(best)


def _detectors_loop(policy: Policy, calls: Sequence[ToolCall]) -> Callable[[], None]:
    def loop() -> None:
        observe = Run("bench", policy).observe
        for call in calls:
            observe(call)

    return loop


def _baseline_loop(calls: Sequence[ToolCall]) -> Callable[[], None]:
    # The least any detector must do: keep the call and count its action.
    def loop() -> None:
        kept: list[ToolCall] = []
        counts: dict[str, int] = {}
        keep, get = kept.append, counts.get
        for call in calls:
            keep(call)
            counts[call.action] = get(call.action, 0) + 1

    return loop


def bench_detectors(policy: Policy, calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    rows = []
    for n in SIZES:
        part = calls[:n]
        reps = REPEATS[n]
        # Interleave detector and baseline repeats so drift hits both alike.
        det = base = math.inf
        for _ in range(reps):
            det = min(det, _best_ns(_detectors_loop(policy, part), 1))
            base = min(base, _best_ns(_baseline_loop(part), 1))
        rows.append(
            {
                "calls": n,
                "repeats": reps,
                "detectors_ns_per_call": det / n,
                "baseline_ns_per_call": base / n,
                "x_baseline": det / base,
            }
        )
    first, last = rows[0], rows[-1]
    for r in rows:
        r["per_call_vs_1k"] = r["detectors_ns_per_call"] / first["detectors_ns_per_call"]
        r["baseline_per_call_vs_1k"] = r["baseline_ns_per_call"] / first["baseline_ns_per_call"]
    return rows


def count_findings(policy: Policy, calls: Sequence[ToolCall]) -> dict[str, int]:
    """Findings the workload produces (untimed): shows the detectors had work to do."""
    run = Run("bench", policy)
    kinds: dict[str, int] = {}
    for call in calls:
        for f in run.observe(call):
            key = f"{f.kind}:{f.severity}"
            kinds[key] = kinds.get(key, 0) + 1
    return dict(sorted(kinds.items()))


def _fingerprint_inputs(n: int) -> list[RawCall]:
    """Distinct small `search` calls: 5 argument keys, a small result."""
    rng = random.Random(7)
    raws = []
    for i in range(n):
        args = {
            "query": f"weather in city {i} {rng.randrange(10**6)}",
            "limit": 10,
            "lang": "en",
            "safe": True,
            "filters": {"site": f"site{i % 13}.example.com"},
        }
        res = {"hits": [{"title": f"result {i}", "url": f"https://e.example/{i}"}], "total": i}
        raws.append(RawCall(seq=i, tool="search", arguments=args, result=res, turn=i))
    return raws


def bench_fingerprint(policy: Policy) -> dict[str, Any]:
    fp = fingerprinter(policy)
    parsed = _fingerprint_inputs(FINGERPRINT_CALLS)
    as_text = [
        RawCall(seq=r.seq, tool=r.tool, arguments=json.dumps(r.arguments), result=json.dumps(r.result), turn=r.turn)
        for r in parsed
    ]
    args_list = [r.arguments for r in parsed]

    def baseline() -> None:
        for a in args_list:
            hashlib.sha256(json.dumps(a, sort_keys=True).encode()).hexdigest()

    def digest(raws: list[RawCall]) -> Callable[[], None]:
        def loop() -> None:
            for r in raws:
                fingerprint_call(r, fp)

        return loop

    base = fp_dict = fp_text = math.inf
    for _ in range(FINGERPRINT_REPEATS):
        base = min(base, _best_ns(baseline, 1))
        fp_dict = min(fp_dict, _best_ns(digest(parsed), 1))
        fp_text = min(fp_text, _best_ns(digest(as_text), 1))
    n = FINGERPRINT_CALLS
    return {
        "calls": n,
        "repeats": FINGERPRINT_REPEATS,
        "baseline_ns_per_call": base / n,
        "parsed_ns_per_call": fp_dict / n,
        "parsed_x_baseline": fp_dict / base,
        "json_text_ns_per_call": fp_text / n,
        "json_text_x_baseline": fp_text / base,
    }


# --------------------------------------------------------------------------- memory


def _traced_now() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def bench_run_memory(policy: Policy) -> list[dict[str, Any]]:
    """Retained bytes of one Run after n calls, fingerprinted as a shell would.

    Calls are fingerprinted inside the traced region and dropped after
    `observe`, so whatever stays allocated is what the Run keeps alive,
    including the ToolCall records and digests its detectors hold on to.
    """
    fp = fingerprinter(policy)
    gen = workload(MEMORY_CHECKPOINTS[-1])
    stream = itertools.chain([next(gen)], gen)  # generator started before tracing
    checkpoints = set(MEMORY_CHECKPOINTS)
    points = []
    tracemalloc.start()
    try:
        start = _traced_now()
        run = Run("bench-mem", policy)
        for n, raw in enumerate(stream, start=1):
            run.observe(fingerprint_call(raw, fp))
            if n in checkpoints:
                points.append({"calls": n, "retained_bytes": _traced_now() - start})
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    del run
    for p in points:
        p["bytes_per_call"] = p["retained_bytes"] / p["calls"]
    points[-1]["peak_bytes"] = peak
    return points


def bench_record_memory(policy: Policy, n: int) -> dict[str, Any]:
    """Bytes per ToolCall: a list of n fingerprinted calls (all alive), divided by n."""
    fp = fingerprinter(policy)
    gen = workload(n)
    stream = itertools.chain([next(gen)], gen)  # generator started before tracing
    tracemalloc.start()
    try:
        start = _traced_now()
        calls = [fingerprint_call(r, fp) for r in stream]
        used = _traced_now() - start
    finally:
        tracemalloc.stop()
    assert len(calls) == n
    del calls
    return {"records": n, "bytes": used, "bytes_per_record": used / n}


# --------------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def _kib(b: float) -> str:
    return f"{b / 1024:,.1f} KiB"


def print_table(res: dict[str, Any]) -> None:
    m = res["machine"]
    print(f"otel-loopguard core benchmark  (Python {m['python']}, {m['cpus']} CPUs, {m['platform']})")
    print(f"workload build: {res['build_ns_per_call'] / 1000:.1f} us/call to fingerprint the mix (untimed below)")
    print()
    print("1. Run.observe per call (precomputed ToolCalls, best of repeats, gc off)")
    print(f"   {'calls':>8} {'detectors':>12} {'baseline':>10} {'x baseline':>11} {'vs 1k':>7} {'baseline vs 1k':>15}")
    for r in res["detectors"]:
        print(
            f"   {r['calls']:>8,} {r['detectors_ns_per_call']:>9,.0f} ns {r['baseline_ns_per_call']:>7,.0f} ns"
            f" {r['x_baseline']:>10.1f}x {r['per_call_vs_1k']:>6.2f}x {r['baseline_per_call_vs_1k']:>14.2f}x"
        )
    d = res["detectors"]
    print(f"   per-call cost at 100k / 1k: {d[-1]['per_call_vs_1k']:.2f}")
    print(f"   detectors cost {d[-1]['x_baseline']:.1f} x baseline (at {d[-1]['calls']:,} calls)")
    print(f"   findings over the 100k mix: {res['findings']}")
    print()
    f = res["fingerprint"]
    print(f"2. fingerprint_call per call ({f['calls']:,} distinct small calls, 5 argument keys)")
    print(f"   baseline json.dumps(args, sort_keys=True) + sha256: {f['baseline_ns_per_call']:,.0f} ns")
    print(
        f"   arguments/result as parsed values: {f['parsed_ns_per_call']:,.0f} ns"
        f"  -> fingerprinting costs {f['parsed_x_baseline']:.1f} x baseline"
    )
    print(
        f"   arguments/result as JSON text:     {f['json_text_ns_per_call']:,.0f} ns"
        f"  -> fingerprinting costs {f['json_text_x_baseline']:.1f} x baseline"
    )
    print()
    print("3. memory (tracemalloc)")
    print(f"   {'calls':>8} {'retained by one Run':>20} {'per call':>10}")
    for p in res["run_memory"]:
        print(f"   {p['calls']:>8,} {_kib(p['retained_bytes']):>20} {p['bytes_per_call']:>8,.0f} B")
    mem = res["run_memory"]
    print(f"   100k / 10k retained: {mem[-1]['retained_bytes'] / _at(mem, 10_000)['retained_bytes']:.2f}")
    r = res["record_memory"]
    print(f"   ToolCall record: {r['bytes_per_record']:,.0f} B each ({r['records']:,} in a list: {_kib(r['bytes'])})")
    print(f"\ntotal benchmark time: {res['seconds']:.1f} s")


def _at(points: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    return next(p for p in points if p["calls"] == calls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    policy = policy_from_mapping(POLICY_DATA, "bench")
    fp = fingerprinter(policy)
    raws = list(workload(SIZES[-1]))
    tb = time.perf_counter_ns()
    calls = [fingerprint_call(r, fp) for r in raws]
    build = (time.perf_counter_ns() - tb) / len(calls)
    del raws

    res: dict[str, Any] = {"machine": machine(), "build_ns_per_call": build}
    res["detectors"] = bench_detectors(policy, calls)
    res["findings"] = count_findings(policy, calls)
    res["fingerprint"] = bench_fingerprint(policy)
    del calls
    gc.collect()
    res["run_memory"] = bench_run_memory(policy)
    res["record_memory"] = bench_record_memory(policy, SIZES[-1])
    res["seconds"] = time.perf_counter() - t0

    if args.json:
        json.dump(res, sys.stdout, indent=2)
        print()
    else:
        print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
