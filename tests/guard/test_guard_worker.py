"""The guard fingerprints recorded calls on its worker, never deciding on a stale run.

Every recorded run of the repository (the public-report corpus, the fixtures) is replayed
through guards that differ only in where a recorded call is fingerprinted: on the caller's
thread inside record() (`background=False`), on the worker, and by check() itself (a worker
that never gets to it, a full queue). Every decision, every finding and every stop must be
the same, call by call.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from otel_loopguard.canon import load_key
from otel_loopguard.enforce import Guard
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import load_policy, policy_from_mapping

KEY = b"guard-worker-test-key-0123"
REPEAT = {"version": "repeat-1", "repeat": {"warn_at": 2, "stop_at": 3}}
TESTS = Path(__file__).resolve().parents[1]
RUNS = sorted((TESTS / "corpus" / "public").glob("*.ndjson")) + sorted((TESTS / "fixtures" / "ndjson").glob("*.ndjson"))
# Budgets low enough that recorded runs cross them: the late warning of the wall time, the
# call and turn budgets (record_model), beside the built-in policy and the fixtures' own.
BUDGETS = {"version": "budgets-1", "budget": {"max_seconds": 9, "max_tool_calls": 12, "max_turns": 30}}
POLICIES: dict[str, Callable[[], Any]] = {
    "default": lambda: load_policy(None),
    "seed-v1": lambda: load_policy(TESTS / "fixtures" / "policies" / "seed-v1.yaml"),
    "budgets": lambda: policy_from_mapping(BUDGETS),
}


class Clock:
    """Each reading 0.7 s after the last: calls take time, so the wall-time budget moves."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += 700_000_000
        return self.now


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _replay(guard: Guard, records: list[dict[str, Any]], eager: bool) -> list[Any]:
    """What an adapter sees: each decision, each record()'s findings, and (eager) the call's
    other findings and the run's stop right after it; else all findings at the run's end."""
    log: list[Any] = []
    runs: list[str] = []
    for r in records:
        run = str(r.get("run_id", "r"))
        if run not in runs:
            runs.append(run)
        if r.get("record") == "model":
            log.append(("model", guard.record_model(run_id=run, turn=r["turn"], input_tokens=r.get("input_tokens", 0),
                                                    output_tokens=r.get("output_tokens", 0))))
        elif "tool" in r:
            d = guard.check(r["tool"], r.get("arguments"), run_id=run, turn=r.get("turn"))
            log.append(("check", d.action, d.kind, d.reason, d.message, d.enforced))
            if d.denied:
                continue
            found = guard.record(d, r.get("observation"), r.get("ok", True) is not False, run_id=run)
            late = guard.late_warning(d, found)
            log.append(("record", found, late.reason if late else None))
            if eager:
                log.append(("findings", guard.findings(run), guard.stopped(run)))
    log += [("end", run, guard.findings(run), guard.stopped(run)) for run in runs]
    return log


def _queued(guard: Guard) -> int:
    """Recorded calls of run "r" not observed yet."""
    state = guard._runs.get("r")
    assert state is not None
    return len(state.queued)


def _guard(policy: Any, **kwargs: Any) -> Guard:
    return Guard(Fingerprinter(load_key(key=KEY), policy), clock=Clock(), **kwargs)


class _Behind:
    """A worker that never gets to its jobs: every call is finished by the next check."""

    def __init__(self) -> None:
        self.offered = 0

    def offer(self, job: Any) -> bool:
        self.offered += 1
        return True

    def stop(self) -> None:
        pass


def _variants(policy: Any) -> dict[str, Guard]:
    behind = _guard(policy)
    behind._worker = _Behind()  # type: ignore[assignment]
    return {"worker": _guard(policy), "check_does_it": behind, "queue_full": _guard(policy, queue_cap=0)}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("eager", [True, False], ids=["findings_each_call", "findings_at_end"])
def test_every_recorded_run_gets_the_same_decisions_and_findings_wherever_it_is_fingerprinted(
        policy: str, eager: bool) -> None:
    rules = POLICIES[policy]()
    records = [r for path in RUNS for r in _records(path)]
    expected = _replay(_guard(rules, background=False), records, eager)
    assert any(e[0] == "check" and e[1] != "allow" for e in expected)  # the runs do stop and warn
    for name, guard in _variants(rules).items():
        assert _replay(guard, records, eager) == expected, name
        guard.shutdown()


def test_the_replay_crosses_every_kind_of_finding_the_comparison_relies_on() -> None:
    """Negative control of the comparison: a replay that finds nothing would prove nothing."""
    log = _replay(_guard(POLICIES["budgets"](), background=False), [r for p in RUNS for r in _records(p)], True)
    kinds = {f.kind for e in log if e[0] == "findings" for f in e[1]}
    assert {"repeat", "budget"} <= kinds
    assert any(e[0] == "record" and e[2] for e in log)  # a late wall-time warning
    assert any(e[0] == "findings" and e[2] is not None for e in log)  # a run-level stop


def test_record_returns_the_budgets_findings_at_once_and_the_rest_at_the_next_ask() -> None:
    guard = _guard(policy_from_mapping({**BUDGETS, "repeat": {"warn_at": 2, "stop_at": 9}}))
    guard._worker = _Behind()  # type: ignore[assignment]
    early: list[Any] = []
    for _ in range(6):  # the sixth call's end crosses the wall time's warn level
        d = guard.check("lookup", {"id": 1}, run_id="r")
        early += guard.record(d, {"status": "same"}, True, run_id="r")
    assert _queued(guard)  # nothing observed yet: the worker is behind
    later = guard.findings("r")
    assert not _queued(guard)
    assert {f.kind for f in early} == {"budget"}  # the wall time's warn, ahead of the rest
    assert [f for f in later if f.kind == "budget"] == early  # the same findings, not twins
    assert "repeat" in {f.kind for f in later}
    assert guard.findings("r") == []  # each finding is handed over once


def _repeat_actions(guard: Guard, run_id: str = "r", calls: int = 4) -> list[str]:
    """The action of each of `calls` identical calls, each one allowed recorded."""
    actions = []
    for _ in range(calls):
        d = guard.check("lookup", {"id": 1}, run_id=run_id)
        actions.append(d.action)
        if not d.denied:
            guard.record(d, {"status": "same"}, True, run_id=run_id)
    return actions


@pytest.mark.parametrize("variant", ["check_does_it", "worker", "queue_full"])
def test_a_check_never_judges_a_stale_run(variant: str) -> None:
    """Mutation check: without the settle in check() the third identical call would run
    (check_does_it: a worker that never gets to its jobs)."""
    guard = _variants(policy_from_mapping(REPEAT))[variant]
    actions = _repeat_actions(guard)
    expected = _repeat_actions(_guard(policy_from_mapping(REPEAT), background=False))
    assert actions == expected and "deny" in actions
    guard.shutdown()


def test_the_worker_does_the_fingerprinting_off_the_callers_thread() -> None:
    guard = _guard(load_policy(None))
    seen: list[str] = []
    done = threading.Event()
    original = guard._fingerprint_queued

    def spy(job: Any) -> None:
        seen.append(threading.current_thread().name)
        original(job)
        done.set()

    guard._worker._work = spy  # type: ignore[union-attr]
    d = guard.check("lookup", {"id": 1}, run_id="r")
    guard.record(d, {"status": "ok"}, True, run_id="r")
    assert done.wait(30)
    assert seen == ["otel-loopguard-guard"]
    assert not _queued(guard)  # observed by the worker: the next check has nothing to do
    guard.shutdown()


def test_after_shutdown_record_does_the_work_itself_and_loses_nothing() -> None:
    guard = _guard(policy_from_mapping(REPEAT))
    guard.shutdown()
    for _ in range(2):
        d = guard.check("lookup", {"id": 1}, run_id="r")
        guard.record(d, {"status": "same"}, True, run_id="r")
        assert not _queued(guard)
    assert guard.check("lookup", {"id": 1}, run_id="r").denied


def test_a_worker_failure_never_reaches_the_app_and_the_check_still_decides() -> None:
    guard = _guard(policy_from_mapping(REPEAT))
    done = threading.Event()

    def broken(job: Any) -> None:
        done.set()
        raise RuntimeError("boom")

    guard._worker._work = broken  # type: ignore[union-attr]
    for _ in range(2):
        d = guard.check("lookup", {"id": 1}, run_id="r")
        guard.record(d, {"status": "same"}, True, run_id="r")
    assert done.wait(30)
    assert guard.check("lookup", {"id": 1}, run_id="r").denied  # the check did the worker's job
    guard.shutdown()


def test_the_worker_queue_is_bounded_and_a_full_one_moves_the_work_to_the_caller() -> None:
    from otel_loopguard.enforce.worker import GuardWorker

    gate, holding = threading.Event(), threading.Event()
    ran: list[int] = []

    def work(job: int) -> None:
        holding.set()
        gate.wait(30)
        ran.append(job)

    worker = GuardWorker(work, cap=2)
    assert worker.offer(0) and holding.wait(30)  # the thread holds job 0 at the gate
    # Two more wait in the queue; the rest are refused (the caller does them), not dropped.
    assert [worker.offer(i) for i in range(1, 6)] == [True, True, False, False, False]
    gate.set()
    deadline = threading.Event()
    for _ in range(300):  # the queued jobs still run, in order
        if len(ran) == 3:
            break
        deadline.wait(0.1)
    assert ran == [0, 1, 2]
    worker.stop()



def test_the_guard_bench_still_runs_both_setups_on_the_same_calls() -> None:
    """bench/bench_guard.py against the code it measures (tiny sizes; nothing timed)."""
    import importlib.util
    import sys

    path = TESTS.parent / "bench" / "bench_guard.py"
    spec = importlib.util.spec_from_file_location("_bench_guard", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    rows = bench.measure(calls=8, gap=0, repeats=1)
    assert [r["calls"] for r in rows] == ["small", "shell", "search", "file", "mix"]
    assert all(r["same_recorded"] and r["recorded"] > 0 for r in rows)


@pytest.mark.real  # forks a process
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_its_own_worker_and_decides_as_the_parent_would() -> None:
    import os
    import warnings

    guard = _guard(policy_from_mapping(REPEAT))
    d = guard.check("lookup", {"id": 1}, run_id="parent")
    guard.record(d, {"status": "same"}, True, run_id="parent")  # the parent's worker is started
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: intended here
        pid = os.fork()
    if pid == 0:  # the child: its own worker, its own lock; never returns into pytest
        try:
            actions = _repeat_actions(guard, run_id="child")
            started = guard._worker is not None and guard._worker.alive
            os._exit(0 if actions == ["allow", "warn", "deny", "deny"] and started else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert guard.check("lookup", {"id": 1}, run_id="parent").action == "warn"  # the parent goes on
    guard.shutdown()
