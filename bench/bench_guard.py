#!/usr/bin/env python
"""Benchmark of the guard (issue 26, item 5): the application thread's CPU per tool call.

    .venv/bin/python bench/bench_guard.py          # table
    .venv/bin/python bench/bench_guard.py --json   # machine-readable

An adapter calls `check()` before a tool runs and `record()` after it. Both are timed on the
application's thread (`time.thread_time`) for the same calls in the same process, with the
guard fingerprinting recorded calls inline (`background=False`: the path before the worker)
and on its worker (the default). Between calls the tool "runs" (a short sleep, not timed), as
in an agent: the worker fingerprints the call meanwhile. `--gap 0` shows calls back to back,
where the worker is behind and each check finishes the call itself. The process's CPU per call
(both threads) is shown beside: the work moves, it does not vanish. The ratio is what compares
across machines. Payloads are bench_equivalence.py's four. Nothing here asserts on time;
figures go to docs/performance.md and docs/guard.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

# The checkout this script is in, before any installed copy (see bench_equivalence.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_equivalence import _payloads  # noqa: E402

from otel_loopguard.canon import load_key  # noqa: E402
from otel_loopguard.enforce import Guard  # noqa: E402
from otel_loopguard.fingerprint import Fingerprinter  # noqa: E402
from otel_loopguard.policy import load_policy  # noqa: E402

CALLS = 400
RUN_LENGTH = 40  # calls per run: well inside the built-in budgets, so every call is recorded
KINDS = ("small", "shell", "search", "file")
KEY = load_key(key=b"bench-guard-key-0123456789abcdef")


def _calls(kind: int, n: int) -> list[tuple[str, Any, str]]:
    """(tool, arguments, result) of n distinct calls of one kind (-1: the four in turn)."""
    picked = [_payloads(i)[kind if kind >= 0 else i % 4] for i in range(n)]
    return [(tool, json.loads(args), result) for tool, args, result in picked]


def app_thread_us(background: bool, calls: list[tuple[str, Any, str]], gap: float) -> dict[str, float]:
    """The application thread's CPU in check() + record() per recorded call (the built-in
    policy stops some runs of near-duplicate calls: their denied checks are left out), and
    the process's CPU per call."""
    guard = Guard(Fingerprinter(KEY, load_policy(None)), background=background)
    app = 0.0
    recorded = 0
    gc.collect()
    process0 = time.process_time()
    for i, (tool, args, result) in enumerate(calls):
        run = f"run-{i // RUN_LENGTH}"
        t0 = time.thread_time()
        d = guard.check(tool, args, run_id=run)
        if d.denied:  # a stopped run's calls cost a check only: not what is measured
            continue
        guard.record(d, result, True, run_id=run)
        app += time.thread_time() - t0
        recorded += 1
        if gap:
            time.sleep(gap)  # the tool runs (and the worker fingerprints the last call)
    for r in range(len(calls) // RUN_LENGTH + 1):
        guard.findings(f"run-{r}")  # every call observed before the process CPU is read
    process = time.process_time() - process0
    guard.shutdown()
    return {"app_us": app / recorded * 1e6, "process_us": process / len(calls) * 1e6, "recorded": recorded}


def measure(calls: int = CALLS, gap: float = 0.002, repeats: int = 3) -> list[dict[str, Any]]:
    rows = []
    for kind, name in [(k, n) for k, n in enumerate(KINDS)] + [(-1, "mix")]:
        workload = _calls(kind, calls)
        best: dict[bool, dict[str, float]] = {}
        for _ in range(repeats):  # interleaved, best of each: load on the machine hits both alike
            for background in (False, True):
                got = app_thread_us(background, workload, gap)
                if background not in best or got["app_us"] < best[background]["app_us"]:
                    best[background] = got
        inline, worker = best[False], best[True]
        rows.append({"calls": name, "inline_app_us": round(inline["app_us"], 1), "worker_app_us": round(worker["app_us"], 1),
                     "app_ratio": round(worker["app_us"] / inline["app_us"], 3),
                     "inline_process_us": round(inline["process_us"], 1),
                     "worker_process_us": round(worker["process_us"], 1),
                     "recorded": int(worker["recorded"]), "same_recorded": inline["recorded"] == worker["recorded"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--gap", type=float, default=0.002, help="seconds a tool runs between calls (0: back to back)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure(args.calls, args.gap, args.repeats)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"guard, app-thread CPU per recorded call (check + record), gap {args.gap * 1000:g} ms, {args.calls} calls; process: both threads, per call")
    print(f"{'calls':8} {'inline us':>10} {'worker us':>10} {'ratio':>7} {'process inline':>15} {'process worker':>15}")
    for r in rows:
        print(f"{r['calls']:8} {r['inline_app_us']:10.1f} {r['worker_app_us']:10.1f} {r['app_ratio']:7.3f} "
              f"{r['inline_process_us']:15.1f} {r['worker_process_us']:15.1f}")


if __name__ == "__main__":
    main()
