#!/usr/bin/env python
"""Benchmark of the native module: the cost of a payload's canonical form + keyed digest on the
Python path against the Rust module (native/), in the same process.

    .venv/bin/python bench/bench_native.py              # table
    .venv/bin/python bench/bench_native.py --json       # the same figures as JSON
    .venv/bin/python bench/bench_native.py --callgrind  # also instruction counts (valgrind)

What is timed per payload, each payload distinct and a fresh Fingerprinter per repeat (so the
memo of recent payloads never answers): `Fingerprinter.action_digest` (arguments) and
`Fingerprinter.result_digests` (results, with the volatile-value masking), once on the Python
path (orjson shortcut included, as installed) and once on the native one, plus the reference
rules alone (`canonical.parse` + `serialise`) against `native.canonical`. Payload sets: the
tool arguments and results of the recorded real spans (research/conventions/captures), small
synthetic arguments (5 keys), and large results (~20 KB). Ratios are what compares across
machines; nothing here asserts on time (docs/performance.md).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

# The checkout this script is in, before any installed copy: an editable install may point at
# another checkout, whose code would then be measured instead.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otel_loopguard.canon import DigestKey
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.canon import canonical as canon
from otel_loopguard.canon import rust as native
from otel_loopguard.policy import Policy

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "research" / "conventions" / "captures"
REPEATS = 5
SECRET = b"bench-native-key-0123456789"
TOOL_KEYS = ("input.value", "output.value", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
             "tool.arguments", "tool.result", "mcp.tool.arguments", "mcp.tool.result")


def recorded_payloads() -> list[str]:
    """Every distinct JSON object/array text among the recorded spans' attribute values."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and node[:1] in "{[" and len(node) > 2:
            found.add(node)

    for path in sorted(CAPTURES.rglob("*.json")):
        walk(json.loads(path.read_text(encoding="utf-8")).get("spans", []))
    return sorted(found)


def small_payloads(n: int) -> list[str]:
    rng = random.Random(7)
    return [json.dumps({"query": f"order {i} status", "limit": rng.randint(1, 50), "page": i % 7,
                        "filters": {"region": rng.choice("NESW"), "open": bool(i % 2)}, "lang": "en"})
            for i in range(n)]


def large_payloads(n: int) -> list[str]:
    rng = random.Random(11)
    return [json.dumps({"items": [{"id": f"it-{i}-{j}", "title": f"Item {j} of batch {i}", "price": rng.random() * 100,
                                   "tags": ["a", "b", "é"], "stock": rng.randint(0, 999)} for j in range(180)],
                        "next": f"cursor-{i}"}) for i in range(n)]


def _timed(work: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            work()
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def digest_all(payloads: Sequence[str], use_native: bool) -> Callable[[], None]:
    policy = Policy()
    rule = policy.rule("search")
    key = DigestKey(SECRET)

    def work() -> None:
        saved = native.AVAILABLE
        native.AVAILABLE = use_native and saved  # read per call by Fingerprinter._native_prefix
        try:
            fp = Fingerprinter(key, policy)  # a fresh memo: every payload is computed
            for p in payloads:
                fp.action_digest("search", rule, p)
                fp.result_digests("search", rule, p)
        finally:
            native.AVAILABLE = saved
    return work


def canonical_all(payloads: Sequence[str], use_native: bool) -> Callable[[], None]:
    drop = Policy().result_volatile_fields
    limits = (canon.DEFAULT_MAX_BYTES, canon.DEFAULT_MAX_DEPTH)

    def python() -> None:
        for p in payloads:
            canon.serialise(canon.parse(p, max_bytes=limits[0]), drop_keys=drop, max_depth=limits[1])

    def rust() -> None:
        for p in payloads:
            native.canonical(p, drop, *limits)
    return rust if use_native else python


def measure(sets: dict[str, list[str]]) -> list[dict[str, Any]]:
    rows = []
    for name, payloads in sets.items():
        size = sum(len(p.encode()) for p in payloads) / len(payloads)
        for what, make in (("digests (action + result)", digest_all), ("canonical rules only", canonical_all)):
            py = _timed(make(payloads, False)) / len(payloads)
            rs = _timed(make(payloads, True)) / len(payloads)
            rows.append({"set": name, "payloads": len(payloads), "mean_bytes": round(size), "what": what,
                         "python_ns": round(py * 1e9), "native_ns": round(rs * 1e9), "ratio": round(py / rs, 1)})
    return rows


# -- instruction counts: valgrind --tool=callgrind, the same work with and without the payloads --

_CHILD = """
import sys; sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
import bench_native as b
payloads = b.recorded_payloads()[:{n}]
work = b.{make}(payloads, {native})
b.REPEATS = 1
work() if payloads else None
"""


def _instructions(make: str, n: int, use_native: bool) -> int:
    from valgrind_count import instructions  # bench/, beside this script (run as one: --callgrind)

    code = _CHILD.format(root=str(ROOT), bench=str(ROOT / "bench"), n=n, native=use_native, make=make)
    return instructions(code, env={"PYTHONHASHSEED": "0"})


def callgrind(n: int) -> list[dict[str, Any]]:
    """Instructions per payload: the same process with and without the payloads, subtracted."""
    base = _instructions("digest_all", 0, False)  # imports and setup only
    rows = []
    for what, make in (("digests (action + result)", "digest_all"), ("canonical rules only", "canonical_all")):
        py = (_instructions(make, n, False) - base) / n
        rs = (_instructions(make, n, True) - base) / n
        rows.append({"what": what, "payloads": n, "python_instructions": round(py), "native_instructions": round(rs),
                     "ratio": round(py / rs, 1)})
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--callgrind", action="store_true", help="instruction counts under valgrind (slow)")
    ap.add_argument("--callgrind-payloads", type=int, default=300)
    args = ap.parse_args(argv)
    if not native.AVAILABLE:
        sys.exit("the native module is not in use: bash scripts/native.sh (and unset OTEL_LOOPGUARD_PURE_PYTHON)")
    recorded = recorded_payloads()
    sets = {"recorded tool/LLM payloads": recorded, "small arguments (5 keys)": small_payloads(2000),
            "large results (~20 KB)": large_payloads(40)}
    report: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(),
                              "rows": measure(sets)}
    if args.callgrind:
        report["callgrind"] = callgrind(min(args.callgrind_payloads, len(recorded)))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"Python {report['python']} on {report['machine']}; best of {REPEATS}; per payload")
    print(f"{'payload set':30} {'n':>5} {'bytes':>6}  {'timed':28} {'python ns':>10} {'native ns':>10} {'ratio':>6}")
    for r in report["rows"]:
        print(f"{r['set']:30} {r['payloads']:>5} {r['mean_bytes']:>6}  {r['what']:28} {r['python_ns']:>10,} "
              f"{r['native_ns']:>10,} {r['ratio']:>5}x")
    for c in report.get("callgrind", []):
        print(f"callgrind, {c['payloads']} recorded payloads, {c['what']}, instructions per payload: python "
              f"{c['python_instructions']:,}, native {c['native_instructions']:,}: {c['ratio']}x")


if __name__ == "__main__":
    main()
