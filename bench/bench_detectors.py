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
import contextlib
import dataclasses
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

# The checkout this script is in, before any installed copy: an editable install may point at
# another checkout, whose code would then be measured instead.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otel_loopguard.calls import Evidence, RawCall, ToolCall
from otel_loopguard.detect.run import Run
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
from otel_loopguard.policy import Policy, policy_from_mapping

SIZES = (1_000, 10_000, 100_000)
# More repeats for small runs: their totals are short and noisier.
REPEATS = {1_000: 21, 10_000: 6, 100_000: 3}  # 1k and 10k: a new slice each time
ROUNDS = 3  # the repeats are spread over this many round-robin rounds
FINGERPRINT_CALLS = 2_000
FINGERPRINT_REPEATS = 5
RUN_CHECKPOINTS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
# A synthetic stream where every call is new to every bounded structure.
SATURATION_CHECKPOINTS = (5_000, 10_000, 20_000, 40_000, 60_000, 75_000, 90_000, 100_000)
CROSS_CHECK_CALLS = 2_000
SEGMENT = 10_000  # the 100k run is also timed per segment of this many calls

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
                tool=tool.encode().decode(),  # a new string per call, as decoding a span gives
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


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect once, then keep the cyclic collector off while timing (as timeit does)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def timed_ns(fn: Callable[[], None]) -> int:
    t0 = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t0


def fresh(value: Any) -> Any:
    """A copy with new objects all the way down (strings and big ints included).

    tracemalloc only counts blocks allocated while it traces. The timing passes
    need ToolCalls built up front; the memory passes feed fresh copies of them,
    allocated as fingerprint_call allocates them, so what a Run keeps alive is
    counted (checked against fingerprint_call itself: the records cross-check).
    """
    t = type(value)
    if t is str:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
    if t is int:
        return value + 0  # a new object unless it is a cached small int
    if t is float:
        return value + 0.0
    if t is tuple:
        return tuple([fresh(x) for x in value])
    if t is frozenset:
        return frozenset([fresh(x) for x in value])  # never the cached empty one
    if t not in _FIELDS and dataclasses.is_dataclass(t):
        _FIELDS[t] = tuple(f.name for f in dataclasses.fields(t))
        try:
            _DEFAULTS[t] = t()
        except TypeError:  # required fields: no default instance
            pass
    names = _FIELDS.get(t)
    if names is None or value == _DEFAULTS.get(t, _NOTHING):
        return value  # None, bool, shared default records (e.g. "no evidence")
    return t(**{n: fresh(getattr(value, n)) for n in names})


_FIELDS: dict[type, tuple[str, ...]] = {}
_DEFAULTS: dict[type, Any] = {}
_NOTHING = object()


def bounded_occupancy(run: Run) -> list[dict[str, Any]]:
    """Every size-bounded container reachable from a run: where, size, limit."""
    found: list[dict[str, Any]] = []
    seen: set[int] = set()

    def visit(obj: Any, where: str, depth: int) -> None:
        if id(obj) in seen or depth > 4:
            return
        seen.add(id(obj))
        limit = getattr(obj, "_limit", None)
        items = getattr(obj, "_items", None)
        if isinstance(limit, int) and isinstance(items, dict):
            found.append({"where": where, "size": len(items), "limit": limit})
            return
        if isinstance(obj, (list, tuple)):
            for x in obj:
                visit(x, f"{where}.{type(x).__name__}", depth + 1)
            return
        if type(obj).__module__.startswith("otel_loopguard") and hasattr(obj, "__dict__"):
            for name, x in vars(obj).items():
                if name != "policy" and not name.startswith("_policy"):
                    visit(x, f"{where}.{name}" if where else name, depth + 1)

    visit(run, "", 0)
    return found


# --------------------------------------------------------------------------- 1. detectors


def bench_detectors(policy: Policy, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """ns per observed call for runs of 1k / 10k / 100k calls of the mix.

    Each repeat of a size takes a different slice of the precomputed calls, so
    no size runs on records still warm in the CPU cache from the repeat before.
    The 100k run is also timed per 10k segment: the last segment against the
    first shows whether a call costs more once the run has a long history.
    """

    def detectors(part: Sequence[ToolCall], marks: list[int] | None = None) -> Callable[[], None]:
        def loop() -> None:
            observe = Run("bench", policy).observe
            if marks is None:
                for call in part:
                    observe(call)
                return
            clock = time.perf_counter_ns
            for i in range(0, len(part), SEGMENT):
                for call in part[i : i + SEGMENT]:
                    observe(call)
                marks.append(clock())

        return loop

    def baseline(part: Sequence[ToolCall]) -> Callable[[], None]:
        # The least any detector must do: keep the call and count its action.
        def loop() -> None:
            kept: list[ToolCall] = []
            counts: dict[str, int] = {}
            keep, get = kept.append, counts.get
            for call in part:
                keep(call)
                counts[call.action] = get(call.action, 0) + 1

        return loop

    det = {n: math.inf for n in SIZES}
    base = {n: math.inf for n in SIZES}
    done = {n: 0 for n in SIZES}
    segments = [math.inf] * (SIZES[-1] // SEGMENT)
    with gc_paused():
        # Round-robin over sizes, detectors and baseline interleaved: a burst of
        # load from elsewhere on the machine hits every size and the baseline alike.
        for _ in range(ROUNDS):
            for n in SIZES:
                for _ in range(REPEATS[n] // ROUNDS):
                    k = done[n]
                    done[n] += 1
                    lo = k * n if (k + 1) * n <= len(calls) else 0
                    part = calls[lo : lo + n]
                    if n == SIZES[-1]:
                        marks: list[int] = []
                        loop = detectors(part, marks)
                        t0 = time.perf_counter_ns()
                        loop()
                        det[n] = min(det[n], marks[-1] - t0)
                        for i, (a, b) in enumerate(zip([t0, *marks], marks)):
                            segments[i] = min(segments[i], b - a)
                    else:
                        det[n] = min(det[n], timed_ns(detectors(part)))
                    base[n] = min(base[n], timed_ns(baseline(part)))
    rows = [
        {
            "calls": n,
            "repeats": done[n],
            "detectors_ns_per_call": det[n] / n,
            "baseline_ns_per_call": base[n] / n,
            "x_baseline": det[n] / base[n],
        }
        for n in SIZES
    ]
    for r in rows:
        r["per_call_vs_1k"] = r["detectors_ns_per_call"] / rows[0]["detectors_ns_per_call"]
        r["baseline_per_call_vs_1k"] = r["baseline_ns_per_call"] / rows[0]["baseline_ns_per_call"]
    seg_ns = [t / SEGMENT for t in segments]
    return {
        "rows": rows,
        "segment_calls": SEGMENT,
        "segments_ns_per_call": seg_ns,
        "last_vs_first_segment": seg_ns[-1] / seg_ns[0],
    }


# --------------------------------------------------------------------------- 2. fingerprints


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
        dataclasses.replace(r, arguments=json.dumps(r.arguments), result=json.dumps(r.result))
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

    base = fp_parsed = fp_text = math.inf
    with gc_paused():
        for _ in range(FINGERPRINT_REPEATS):
            base = min(base, timed_ns(baseline))
            fp_parsed = min(fp_parsed, timed_ns(digest(parsed)))
            fp_text = min(fp_text, timed_ns(digest(as_text)))
    n = FINGERPRINT_CALLS
    return {
        "calls": n,
        "repeats": FINGERPRINT_REPEATS,
        "baseline_ns_per_call": base / n,
        "parsed_ns_per_call": fp_parsed / n,
        "parsed_x_baseline": fp_parsed / base,
        "json_text_ns_per_call": fp_text / n,
        "json_text_x_baseline": fp_text / base,
    }


# --------------------------------------------------------------------------- 3. memory


def _traced_now() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def bench_memory(policy: Policy, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """Bytes per ToolCall record, then the retained size of one Run fed those records.

    Under tracemalloc, fresh copies of the 100k calls fill a list: its traced
    size / 100k is the record size, and the traced size of each prefix is kept.
    One Run then observes the records in order, each dropped from the list
    once observed, so at n calls what is alive is the Run (with whatever
    records it keeps) plus the records not yet observed, whose size is known:
    Run(n) = traced - (records total - records prefix(n)).
    """
    total = len(calls)
    marks = set(RUN_CHECKPOINTS)
    kept: list[Any] = [None] * total  # allocated before tracing: not counted
    prefix: dict[int, int] = {}
    kinds: dict[str, int] = {}
    points = []
    tracemalloc.start()
    try:
        gc.disable()  # collected in _traced_now only
        start = _traced_now()
        for i, call in enumerate(calls):
            kept[i] = fresh(call)
            if i + 1 in marks:
                prefix[i + 1] = tracemalloc.get_traced_memory()[0] - start
        del call
        records = _traced_now() - start
        run = Run("bench-mem", policy)
        for i in range(total):
            call, kept[i] = kept[i], None
            for f in run.observe(call):
                kinds[f"{f.kind}:{f.severity}"] = kinds.get(f"{f.kind}:{f.severity}", 0) + 1
            del call
            n = i + 1
            if n in marks:
                unobserved = records - prefix[n]
                points.append({"calls": n, "retained_bytes": _traced_now() - start - unobserved})
    finally:
        gc.enable()
        tracemalloc.stop()
    for p in points:
        p["bytes_per_call"] = p["retained_bytes"] / p["calls"]
    return {
        "records": {"records": total, "bytes": records, "bytes_per_record": records / total},
        "run": {"points": points, "bounded": bounded_occupancy(run), "findings": dict(sorted(kinds.items()))},
    }


def records_cross_check(policy: Policy, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """Bytes per record built by fingerprint_call itself vs by `fresh` (first calls of the mix)."""
    fp = fingerprinter(policy)
    head = workload(CROSS_CHECK_CALLS)
    stream = itertools.chain([next(head)], head)  # generator started before tracing
    tracemalloc.start()
    try:
        gc.disable()
        start = _traced_now()
        direct = [fingerprint_call(r, fp) for r in stream]
        direct_used = _traced_now() - start
        start = _traced_now()
        copies = [fresh(c) for c in calls[:CROSS_CHECK_CALLS]]
        copies_used = _traced_now() - start
    finally:
        gc.enable()
        tracemalloc.stop()
    assert direct == copies  # the same records, built two ways
    return {
        "records": CROSS_CHECK_CALLS,
        "fingerprint_call_bytes_per_record": direct_used / CROSS_CHECK_CALLS,
        "fresh_copy_bytes_per_record": copies_used / CROSS_CHECK_CALLS,
    }


_NO_EVIDENCE = Evidence()


def saturation_stream(n: int) -> Iterator[ToolCall]:
    """Synthetic calls, each new to every bounded structure of a Run.

    Distinct actions, results and turns on every call; every 4th call a new
    side-effect write, every 4th a page of 8 unseen item ids.
    """
    for i in range(n):
        digest = f"{(i * 0x9E3779B97F4A7C15) % (1 << 128):032x}"
        other = f"{(i * 0xC2B2AE3D27D4EB4F + 1) % (1 << 128):032x}"
        kind = i % 4
        tool = ("search", "send_email", "list_items", "fetch_url")[kind]
        evidence = _NO_EVIDENCE  # shared, as fingerprint_call shares it for tools without a rule
        if kind == 2:
            evidence = Evidence(item_ids=tuple(i * 8 + k + (1 << 40) for k in range(8)))
        yield ToolCall(
            seq=i,
            tool=tool,
            action=digest,
            result=other,
            ok=True,
            turn=i,
            call_id=f"call_{i}",
            span_id=f"{i:016x}",
            start_ns=1_700_000_000_000_000_000 + i * 100_000_000,
            end_ns=1_700_000_000_040_000_000 + i * 100_000_000,
            evidence=evidence,
            write=other[::-1] if kind == 1 else None,
            write_key=digest[::-1] if kind == 1 else None,
            flags=frozenset([]),
        )


def bench_saturation(policy: Policy) -> dict[str, Any]:
    """Retained size of one Run fed the saturating stream (built under tracing, dropped after observe)."""
    marks = set(SATURATION_CHECKPOINTS)
    stream = saturation_stream(SATURATION_CHECKPOINTS[-1])
    points = []
    tracemalloc.start()
    try:
        gc.disable()
        start = _traced_now()
        run = Run("bench-sat", policy)
        for n, call in enumerate(stream, start=1):
            run.observe(call)
            if n in marks:
                del call
                points.append({"calls": n, "retained_bytes": _traced_now() - start})
    finally:
        gc.enable()
        tracemalloc.stop()
    for p in points:
        p["bytes_per_call"] = p["retained_bytes"] / p["calls"]
    return {"points": points, "bounded": bounded_occupancy(run)}


# --------------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_1m_at_start": round(load[0], 2) if load else None,
    }


def _kib(b: float) -> str:
    return f"{b / 1024:,.0f} KiB"


def _memory_table(points: list[dict[str, Any]], bounded: list[dict[str, Any]]) -> None:
    print(f"   {'calls':>8} {'retained by one Run':>20} {'per call':>9}")
    for p in points:
        print(f"   {p['calls']:>8,} {_kib(p['retained_bytes']):>20} {p['bytes_per_call']:>7,.0f} B")
    full = [f"{b['where']} {b['size']}/{b['limit']}" for b in bounded if b["size"]]
    print(f"   bounded containers (size/limit): {', '.join(full)}")


def print_table(res: dict[str, Any]) -> None:
    m = res["machine"]
    print(f"otel-loopguard core benchmark: Python {m['python']}, {m['cpus']} CPUs, {m['platform']}")
    print(f"load average (1 min) at start {m['loadavg_1m_at_start']}, at end {res['loadavg_1m_at_end']}")
    print(f"building the 100k-call mix with fingerprint_call: {res['build_ns_per_call'] / 1000:,.1f} us/call")
    print()
    det = res["detectors"]
    print("1. Run(run_id, policy).observe(call) on precomputed ToolCalls (best of repeats, gc paused)")
    print(f"   {'calls':>8} {'detectors':>11} {'baseline':>9} {'x baseline':>11} {'per call vs 1k':>15}"
          f" {'baseline vs 1k':>15}")
    for r in det["rows"]:
        print(
            f"   {r['calls']:>8,} {r['detectors_ns_per_call']:>8,.0f} ns"
            f" {r['baseline_ns_per_call']:>6,.0f} ns"
            f" {r['x_baseline']:>10.1f}x {r['per_call_vs_1k']:>14.2f}x {r['baseline_per_call_vs_1k']:>14.2f}x"
        )
    last = det["rows"][-1]
    seg = det["segments_ns_per_call"]
    print(f"   per-call cost, 100k run vs 1k run: {last['per_call_vs_1k']:.2f}")
    shown = ", ".join(f"{x:,.0f}" for x in seg)
    print(f"   100k run per {det['segment_calls']:,}-call segment (ns/call): {shown}")
    print(f"   last segment vs first: {det['last_vs_first_segment']:.2f}")
    print(f"   detectors cost {last['x_baseline']:.1f} x baseline"
          " (100k calls; baseline = list append + dict counter)")
    print(f"   findings over the 100k mix: {res['run_memory']['findings']}")
    print()
    f = res["fingerprint"]
    print(f"2. fingerprint_call(RawCall) per call: {f['calls']:,} distinct calls,"
          " 5 argument keys, small result")
    print(f"   baseline json.dumps(args, sort_keys=True) + sha256:  {f['baseline_ns_per_call']:>8,.0f} ns")
    print(f"   arguments/result as JSON text (as spans carry them): {f['json_text_ns_per_call']:>8,.0f} ns"
          f"  = {f['json_text_x_baseline']:.1f} x baseline")
    print(f"   arguments/result already parsed:                     {f['parsed_ns_per_call']:>8,.0f} ns"
          f"  = {f['parsed_x_baseline']:.1f} x baseline")
    print()
    print("3. memory (tracemalloc)")
    print("   one Run fed the realistic mix:")
    _memory_table(res["run_memory"]["points"], res["run_memory"]["bounded"])
    print("   one Run fed a saturating stream (every call new to every bounded container):")
    _memory_table(res["saturation"]["points"], res["saturation"]["bounded"])
    r, x = res["records"], res["records_cross_check"]
    print(f"   ToolCall record: {r['bytes_per_record']:,.0f} B each"
          f" ({r['records']:,} in a list: {_kib(r['bytes'])})")
    print(f"   cross-check on {x['records']:,} records: built by fingerprint_call"
          f" {x['fingerprint_call_bytes_per_record']:,.0f} B, by the benchmark's fresh copies"
          f" {x['fresh_copy_bytes_per_record']:,.0f} B")
    times = ", ".join(f"{k} {v:.1f}" for k, v in res["section_seconds"].items())
    print(f"\ntotal time: {res['seconds']:.1f} s ({times})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    res: dict[str, Any] = {"machine": machine()}
    sections: dict[str, float] = {}
    policy = policy_from_mapping(POLICY_DATA, "bench")
    fp = fingerprinter(policy)
    raws = list(workload(SIZES[-1]))
    calls: list[ToolCall] = []
    with gc_paused():
        build = timed_ns(lambda: calls.extend(fingerprint_call(r, fp) for r in raws))
    res["build_ns_per_call"] = build / len(calls)
    del raws
    # The precomputed calls live to the end: keep them out of every collection,
    # so gc.collect() at memory checkpoints only walks what the benchmark adds.
    gc.collect()
    gc.freeze()
    sections["build"] = time.perf_counter() - t0

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("detectors", lambda: bench_detectors(policy, calls)),
        ("fingerprint", lambda: bench_fingerprint(policy)),
        ("memory", lambda: bench_memory(policy, calls)),
        ("records_cross_check", lambda: records_cross_check(policy, calls)),
        ("saturation", lambda: bench_saturation(policy)),
    ]
    for name, step in steps:
        t = time.perf_counter()
        res[name] = step()
        sections[name] = time.perf_counter() - t
    res["run_memory"] = res["memory"]["run"]
    res["records"] = res.pop("memory")["records"]
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    res["loadavg_1m_at_end"] = round(load[0], 2) if load else None
    res["section_seconds"] = {k: round(v, 2) for k, v in sections.items()}
    res["seconds"] = time.perf_counter() - t0

    if args.json:
        json.dump(res, sys.stdout, indent=2)
        print()
    else:
        print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
