"""The benchmarks still run against the code they measure (tiny sizes; nothing timed).

They use internal entry points (the receiver's parse_request and RunAssembler, the
processor's tracer setup): a refactor that breaks them should fail here, not the next
time someone measures.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_receiver_bench_judges_its_mixes_and_finds_the_loops() -> None:
    bench = _load("bench_receiver")
    for payloads in (bench.requests_for(5, tagged=False), bench.requests_for(5, tagged=True, extra_chain=1),
                     bench.recorded_requests(1)):
        assert bench.pipeline(payloads) > 0  # run 0 of each synthetic mix loops; every recorded trace does
        bench.naive(payloads)
        assert bench.decode_only(payloads) > 0
        assert bench.pipeline_python(payloads) > 0 and bench.decode_only_python(payloads) > 0
    assert bench.pipeline(bench.plain_requests(3)) == 0  # no tool or model call: nothing to judge
    # The over-gRPC comparison sends from a spawned process (which cannot import this module
    # under its test name): here only that what it drives exists.
    assert callable(bench.ceiling) and callable(bench._forwarder) and callable(bench._RawSink)  # noqa: SLF001
    memory = bench.memory_per_held_call(200)
    assert memory["held_calls"] == 200 and memory["bytes_per_held_call"] > 0


def test_the_processor_bench_measures_both_setups() -> None:
    bench = _load("bench_processor")
    bench.gc = SimpleNamespace(collect=lambda: 0)  # its timing hygiene: seconds in a worker's large heap, nothing asserted
    for kind in ("tool", "distinct", "stopped", "plain"):
        baseline, guarded = bench.best_pair(kind, 20, 1)
        assert baseline and guarded


def test_the_collector_and_chaos_benches_still_reach_the_harness_they_drive() -> None:
    """They run the Collector and real processes (minutes): here only that what they call exists."""
    collector = _load("bench_collector")
    assert callable(collector.passthrough) and callable(collector.S.store_and_forward)
    assert collector.cpu_seconds(__import__("os").getpid()) > 0
    chaos = _load("chaos")
    assert {"outage", "outage-sync", "sigterm", "sigkill", "sigterm-state", "sigkill-state"} <= set(chaos.SCENARIOS)
    assert callable(chaos.S.wait_delivered) and callable(chaos.S.start_app)


def test_the_calibrate_bench_judges_its_week_and_every_candidate(tmp_path: Path) -> None:
    bench = _load("bench_calibrate")
    files = bench.write_week(tmp_path, 10)
    assert bench.plain_audit(files) >= 2  # run 0 and run 5 loop on one lookup
    assert bench.calibrate(files, bench.SWEEPS[12]) == 13  # current and twelve candidates
    result = bench.measure(runs=5, repeat=1)
    assert result["runs"] == 5 + 4 and result["separate_audits_12_vs_audit"] == 13.0


def test_the_native_bench_times_both_paths_on_the_recorded_payloads() -> None:
    bench = _load("bench_native")
    recorded = bench.recorded_payloads()
    assert len(recorded) > 500  # the captures' tool and model payloads, not an empty folder
    bench.REPEATS = 1
    for use_native in (False, True):  # without the module both run the Python path
        bench.digest_all(recorded[:5] + bench.small_payloads(3) + bench.large_payloads(1), use_native)()
        bench.canonical_all(recorded[:5], use_native)()
    rows = bench.measure({"few": recorded[:3]})
    assert {r["what"] for r in rows} == {"digests (action + result)", "canonical rules only"}


def test_the_decode_fuzzer_runs_its_cases() -> None:
    bench = _load("fuzz_decode")
    outcomes = bench.seeded(300, seed=5)
    assert sum(outcomes.values()) == 300 and outcomes.get("accepted") and outcomes.get("refused")
