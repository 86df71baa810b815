"""bench/bench_mcp.py still runs against the proxy it measures (tiny sizes; nothing timed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")
BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_mcp.py"


def test_the_mcp_bench_measures_every_setup() -> None:
    spec = importlib.util.spec_from_file_location("_bench_mcp", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    report = bench.measure(calls=3, rounds=1)
    assert set(report["setups"]) == {"direct", "observe", "enforce", "http direct", "http observe"}
    assert all(row["median_us"] > 0 for row in report["setups"].values())
    cost = bench.session_cost(20)
    assert cost["proxy_us"] > 0 and cost["framing_and_parse_us"] > 0
