"""Receiver restarts with real processes: SIGTERM and SIGKILL mid-stream, a counting backend.

With `--state-dir`: no accepted span is lost (the forward queue is on disk), none is forwarded
twice (the dedupe keys are on disk), and a run a restart cuts in two is never scored as a
passing half (receiver/runs/restart.py). Each guarantee has its control beside it: the same steps
without a state directory lose spans, forward a retry twice, and score the later half.
"""

from __future__ import annotations

import signal
import struct
import time
from pathlib import Path
from typing import Optional

import pytest

from otel_loopguard.receiver.runs.restart import HEARTBEAT_SECONDS

from collector import scenarios as S
from collector.backend import CountingBackend, Stored
from live import ReceiverProcess, wait_until

from . import handmade


def receiver(backend: CountingBackend, tmp_path: Path, state: bool, *extra: str) -> ReceiverProcess:
    args = ["--forward", backend.address, "--idle-timeout-seconds", "60", "--root-grace-seconds", "0.5", *extra]
    if state:
        args += ["--state-dir", str(tmp_path / "state")]
    return ReceiverProcess(args, S.receiver_env(), tmp_path).start()


def restart(r: ReceiverProcess, sig: int) -> None:
    r.stop(sig)
    r.start()


def spans_of(payloads: list[bytes]) -> set[tuple[str, str]]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = set()
    for data in payloads:
        for rs in ExportTraceServiceRequest.FromString(data).resource_spans:
            for ss in rs.scope_spans:
                out |= {(s.trace_id.hex(), s.span_id.hex()) for s in ss.spans}
    return out


def delivered_on_disk(state_dir: Path) -> int:
    """Forward-queue records acknowledged as delivered (receiver/state/spool.py: 8-byte entries, kind in bit 0)."""
    entries = []
    for f in (state_dir / "queue").glob("*.ack"):
        data = f.read_bytes()
        entries += [e for (e,) in struct.iter_unpack("<Q", data[: len(data) // 8 * 8])]
    return sum(1 for e in entries if e & 1 == 0)


@pytest.mark.parametrize("state", [True, False], ids=["state-dir", "control-in-memory"])
def test_a_crash_during_a_backend_outage_loses_no_accepted_span(backend: CountingBackend, tmp_path: Path,
                                                                 state: bool) -> None:
    backend.down()
    r = receiver(backend, tmp_path, state)
    try:
        payloads = handmade.many(10)
        S.send_raw(r.port, payloads)  # every one answered: queued
        restart(r, signal.SIGKILL)
        backend.up()
        wanted = spans_of(payloads)
        if state:
            wait_until(lambda: wanted <= set(backend.app_counts()), 30, "the queued spans were not delivered",
                       explain=r.logs)
            assert all(backend.app_counts()[k] == 1 for k in wanted)
            assert "not yet delivered are queued again" in r.logs()
        else:
            time.sleep(3)
            assert not wanted & set(backend.app_counts())  # the in-memory queue died with the process
    finally:
        r.stop()


@pytest.mark.parametrize("state", [True, False], ids=["state-dir", "control-in-memory"])
def test_a_retry_after_a_crash_is_not_forwarded_twice(backend: CountingBackend, tmp_path: Path, state: bool) -> None:
    r = receiver(backend, tmp_path, state)
    try:
        first = handmade.many(3)
        S.send_raw(r.port, first)
        wanted = spans_of(first)
        wait_until(lambda: wanted <= set(backend.app_counts()), 20, "first delivery", explain=r.logs)
        if state:  # a kill between the backend's answer and its record on disk sends again (at least once)
            wait_until(lambda: delivered_on_disk(tmp_path / "state") >= len(first), 20, "delivery recorded",
                       explain=r.logs)
        restart(r, signal.SIGKILL)
        S.send_raw(r.port, first)  # the sender never saw our answer, say: it sends again
        marker = handmade.many(1)
        S.send_raw(r.port, marker)
        wait_until(lambda: spans_of(marker) <= set(backend.app_counts()), 20, "marker delivery", explain=r.logs)
        time.sleep(1.0)
        counts = backend.app_counts()
        assert {counts[k] for k in wanted} == ({1} if state else {2})
    finally:
        r.stop()


def summaries_of(backend: CountingBackend, run_id: str) -> list[Stored]:
    return [s for s in backend.snapshot()[2] if s.attributes.get("loopguard.run.id") == run_id]


def findings_of(backend: CountingBackend, run_id: str, kind: Optional[str] = None) -> list[Stored]:
    return [f for f in backend.snapshot()[1]
            if f.attributes.get("loopguard.run.id") == run_id and (kind is None or f.kind == kind)]


def outcome(s: Stored) -> str:
    return str(s.attributes.get("loopguard.run.outcome"))


# What becomes of a looping run whose calls 1-3 reach the first process and 4-6 (with its root)
# the second: (outcomes of its summaries, the calls the last one judged, why it was marked cut).
SPLIT_RUN = {
    # Saved at shutdown (a snapshot), restored at start: judged as the one run it is.
    ("sigterm", "state"): (["scored"], 6, ()),
    # No snapshot, but the first half's requests were kept on disk until judged: fed again.
    ("sigkill", "state"): (["scored"], 6, ()),
    # Without the forward queue nothing keeps them: the second half is marked by the restart rule.
    ("sigkill", "state-sync"): (["incomplete_trace"], 3, ("began before this receiver started",)),
    # In memory: the first half is judged and marked at shutdown. The second is scored on its
    # own calls: the new process cannot tell a restart from a first start (the documented limit).
    ("sigterm", "memory"): (["incomplete_trace", "scored"], 3, ("receiver stopped before the run ended",)),
    ("sigkill", "memory"): (["scored"], 3, ()),
}


@pytest.mark.parametrize("sig,mode", list(SPLIT_RUN), ids=[f"{s}-{m}" for s, m in SPLIT_RUN])
def test_a_run_split_by_a_restart(backend: CountingBackend, tmp_path: Path, sig: str, mode: str) -> None:
    """Untagged spans (no processor): none of the mechanisms needs sequence numbers."""
    outcomes, calls, reasons = SPLIT_RUN[(sig, mode)]
    r = receiver(backend, tmp_path, mode != "memory", *(["--forward-queue-bytes", "0"] if mode == "state-sync" else []))
    try:
        cut = handmade.Run(looping=True)
        first = [handmade.request([cut.call(i) for i in (1, 2, 3)])]
        S.send_raw(r.port, first)  # untagged calls are held until the run completes: nothing judged yet
        wait_until(lambda: spans_of(first) <= set(backend.app_counts()), 20, "the first half delivered", explain=r.logs)
        killed_at = time.time()
        restart(r, getattr(signal, sig.upper()))
        # Negative controls: runs that begin after the restart are judged whole, loop or not.
        # "After" by the rule's margin: a span started within two heartbeats of the previous
        # process's last `alive` stamp may belong to a run it saw (receiver/runs/restart.py).
        time.sleep(max(0.0, killed_at + 2 * HEARTBEAT_SECONDS + 0.1 - time.time()))
        fresh_loop, fresh_ok = handmade.Run(looping=True), handmade.Run(looping=False)
        for run in (cut, fresh_loop, fresh_ok):
            later = [run.call(i) for i in ((4, 5, 6) if run is cut else range(1, 7))]
            S.send_raw(r.port, [handmade.request([*later, run.root()])])
        wait_until(lambda: all(summaries_of(backend, x.run_id) for x in (fresh_loop, fresh_ok))
                   and len(summaries_of(backend, cut.run_id)) == len(outcomes), 20, "every run judged", explain=r.logs)
        halves = summaries_of(backend, cut.run_id)
        assert sorted(outcome(s) for s in halves) == outcomes, r.logs()
        assert halves[-1].attributes.get("loopguard.score.tool_calls", calls) == calls
        found = " ".join(str(f.attributes["loopguard.finding.reason"])
                         for f in findings_of(backend, cut.run_id, "incomplete_trace"))
        assert all(reason in found for reason in reasons) and bool(found) == bool(reasons), found
        if calls == 6:  # judged as one: the loop is stopped once, over the calls of both processes
            stops = [f for f in findings_of(backend, cut.run_id, "repeat") if f.severity == "stop"]
            assert len(stops) == 1 and ("restored" in r.logs() or "fed to the detectors again" in r.logs())
        for run, looped in ((fresh_loop, True), (fresh_ok, False)):
            (summary,) = summaries_of(backend, run.run_id)
            assert outcome(summary) == "scored"
            assert not findings_of(backend, run.run_id, "incomplete_trace")
            assert bool([f for f in findings_of(backend, run.run_id, "repeat") if f.severity == "stop"]) == looped
    finally:
        r.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
@pytest.mark.parametrize("processor", [False, True], ids=["plain-sdk", "processor"])
def test_mid_stream_restart_of_an_app_on_the_sdk_exporter(tmp_path: Path, sig: int, processor: bool) -> None:
    """The SDK's default exporter as the app, a slow backend (0.3 s a request, where duplicates
    appeared without the state directory), the receiver restarted while the app sends."""
    backend = CountingBackend(delay=0.3)
    r = receiver(backend, tmp_path, True, "--idle-timeout-seconds", "5")
    try:
        app = S.start_app(r.port, tmp_path, runs=120, rate=20, processor=processor)
        time.sleep(3.0)
        restart(r, sig)
        d = S.wait_delivered(backend, app.result(), 120, quiet=8, explain=r.logs)
        assert d.lost == 0, d.row()
        # SIGKILL: a request in flight to the backend at that moment is sent again (at most one
        # SDK batch of 512 spans a consumer); SIGTERM waits for the answers.
        assert d.duplicated == 0 or (sig == signal.SIGKILL and d.duplicated <= 4 * 512), d.row()
        # Every run judged whole, once: the restart changes no verdict.
        assert d.cut_passing == 0 and d.loops_missed == 0 and d.unjudged == 0, d.row()
        assert d.loops_stopped == d.loops and d.runs_incomplete == 0 and d.healthy_flagged == 0, d.row()
    finally:
        r.stop()
        backend.down()
