"""bench/bench_equivalence.py still runs against the code it measures (tiny sizes, nothing timed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_equivalence.py"


def test_the_equivalence_bench_measures_both_paths_and_the_processor() -> None:
    spec = importlib.util.spec_from_file_location("_bench_equivalence", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    bench.REPEATS = 1
    rows = bench.measure(calls=5)
    assert len(rows) == 4 and all(r["fingerprint_us"] > 0 and r["fingerprint_eq_us"] > 0 for r in rows)
    spans = bench.processor(spans=40, repeats=1)
    assert spans["cpu_us_per_span"] > 0 and spans["cpu_us_per_span_eq"] > 0
