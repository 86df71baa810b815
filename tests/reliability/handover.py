"""Restarts under load with real processes (issue 27): an app on the SDK's default exporter sends
straight to `serve --forward ... --state-dir DIR`, and the receiver is restarted mid-stream.

Ways to restart, on the same port and state directory ("none": no restart, the baseline):
- "stop-start": SIGTERM, wait for the process to exit, start a new one (the old way);
- "kill-start": SIGKILL, start a new one at once;
- "term-start": SIGTERM and a new process at the same moment (it takes over if the old one
                still holds the state directory, else starts as after a stop);
- "handover":   start a new one while the old one serves; the new one listens beside it
                (SO_REUSEPORT), asks it to stop, takes the state directory over when it is
                released (docs/reliability.md, "Restarts without a gap").
While it happens a prober connects to the port every few milliseconds and counts refusals: the
app's exporter sees the port closed exactly when a connection is refused. Each row also says when
the lost spans ended, seconds from the restart (`when_lost`), and carries the restart's timeline
(`timeline`: the receivers' log lines stamped as they appear, the app's exporter messages and
every export call with its duration), on the system's monotonic clock, which every process shares.

Used by tests/reliability/test_handover.py and bench/chaos.py (`restart-*` scenarios).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from collector import scenarios as S
from collector.backend import CountingBackend
from live import ROOT, ReceiverProcess, child_env, tail, wait_until

LOAD_APP = Path(__file__).resolve().parent / "load_app.py"
TOOK_OVER = "state directory taken over"  # the new process's line once the state is its own


@dataclass
class Prober:
    """Connects to the port every `every` seconds; counts refusals and the longest refused spell."""

    port: int
    every: float = 0.005
    refused: int = 0
    longest: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None

    def start(self) -> "Prober":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        since: Optional[float] = None
        while not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                if since is not None:
                    self.longest = max(self.longest, time.monotonic() - since)
                since = None
            except OSError:
                self.refused += 1
                since = since if since is not None else time.monotonic()
            time.sleep(self.every)
        if since is not None:
            self.longest = max(self.longest, time.monotonic() - since)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


@dataclass
class LogClock:
    """Stamps each new line of the receivers' logs (receiver-*.err in `workdir`) with the system's
    monotonic clock as it appears (polled every 10 ms): the restart's timeline beside the app's."""

    workdir: Path
    lines: list[tuple[float, str, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None

    def start(self) -> "LogClock":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        files: dict[Path, Any] = {}
        partial: dict[Path, str] = {}
        try:
            while True:
                stopping = self._stop.is_set()
                for path in self.workdir.glob("receiver-*.err"):
                    if path not in files:
                        files[path] = path.open(errors="replace")
                    text = partial.get(path, "") + files[path].read()  # what was added since (read on)
                    done = text.rfind("\n") + 1
                    for line in text[:done].splitlines():
                        self.lines.append((time.monotonic(), path.stem.rpartition("-")[2], line[:160]))
                    partial[path] = text[done:]
                if stopping:
                    return
                time.sleep(0.01)
        finally:
            for f in files.values():
                f.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def timeline(t0: float, clock: LogClock, result: dict[str, Any], slow: float = 0.0) -> list[str]:
    """What happened around the restart, in order, seconds from t0: the receivers' log lines (by
    process start number), the app's exporter messages and its export calls slower than `slow`."""
    events = [(t, f"receiver#{n}: {line}") for t, n, line in clock.lines]
    for said in result.get("sdk_said") or []:
        at, _, text = said.partition(" ")
        events.append((float(at), f"app: {text[:200]}"))
    for began, took, what in result.get("exports") or []:
        if took >= slow:
            events.append((began, f"app: export of {what} took {took:.3f} s"))
    return [f"{t - t0:+8.3f} {text}" for t, text in sorted(events) if t - t0 > -3]


def when_lost(backend: CountingBackend, result: dict[str, Any], t0: float, timings: dict[str, float]
              ) -> dict[str, Any]:
    """When the lost spans ended, seconds from the restart (a full queue drops its oldest span as a
    new one ends: a span is lost at most the queue's length, about a second here, after it ended);
    and how many ended during the restart (from t0 until the new process took over, or answered)
    against before and after it."""
    got = {s for _, s in backend.app_counts()}
    ended = result.get("ended") or {}
    lost = sorted(round(at - t0, 2) for span, at in ended.items() if span not in got)
    until = timings.get("takeover_s", timings.get("restart_s", 0.0))
    during = sum(0 <= t <= until for t in lost)
    return {"lost_during_restart": during, "lost_outside_restart": len(lost) - during,
            "lost_from_to_s": [lost[0], lost[-1]] if lost else []}


def unjudged_seen(backend: CountingBackend, result: dict[str, Any]) -> dict[str, int]:
    """Of the runs without a summary (`unjudged`), how many the receiver saw anything of (a span
    stored), and how many more than one span of (the root alone carries nothing to judge: a run
    whose model and tool spans all dropped in the app's queue). A receiver leaves a run it saw calls
    of without a summary only if the last count is above 0."""
    got = backend.app_counts()
    _, _, summaries = backend.snapshot()
    judged = set(S.by_run(summaries))
    runs = (set(result["loops"]) | set(result["healthy"])) - judged
    stored = {run: sum((run, span) in got for span in result["spans"].get(run, ())) for run in runs}
    return {"unjudged_seen": sum(n > 0 for n in stored.values()),
            "unjudged_seen_beyond_root": sum(n > 1 for n in stored.values())}


def start_load_app(port: int, workdir: Path, *, rate: float, seconds: float, calls: int = 9,
                   interval: float = 0.3, app_env: Optional[dict[str, str]] = None) -> S.App:
    out, log = workdir / "app.json", workdir / "app.log"
    env = child_env(lambda k: k.startswith("OTEL_"), OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                    OTEL_SERVICE_NAME="restart-load-app", OTEL_LOOPGUARD_KEY=S.KEY, **(app_env or {}))
    command = [sys.executable, str(LOAD_APP), "--out", str(out), "--rate", str(rate), "--seconds", str(seconds),
               "--calls", str(calls), "--interval", str(interval)]
    with log.open("w") as err:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=err,
                                stderr=subprocess.STDOUT)
    return S.App(proc, out, log)


def receiver(backend: CountingBackend, workdir: Path, *extra: str) -> ReceiverProcess:
    args = ["--forward", backend.address, "--state-dir", str(workdir / "state"), *extra]
    return ReceiverProcess(args, S.receiver_env(), workdir)


def spawn(r: ReceiverProcess) -> subprocess.Popen:
    """A new receiver process on r's port and arguments, without waiting for it (r.proc becomes it)."""
    r.starts += 1
    command = [sys.executable, "-m", "otel_loopguard.cli", "serve", "--listen", r.address, *r.args]
    with r.stderr.open("w") as err:
        r.proc = subprocess.Popen(command, cwd=ROOT, env=r.env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=err)
    return r.proc


def restart(r: ReceiverProcess, how: str, timeout: float = 60) -> dict[str, float]:
    """Restart r `how`; returns seconds until the new process answered (or took the state over)."""
    t0 = time.monotonic()
    old = r.proc
    assert old is not None
    if how == "none":  # the baseline: what the load loses without a restart
        return {}
    if how == "stop-start":
        r.stop(signal.SIGTERM)
        r.start()
        return {"restart_s": round(time.monotonic() - t0, 2)}
    if how == "kill-start":
        r.stop(signal.SIGKILL)
        r.start()
        return {"restart_s": round(time.monotonic() - t0, 2)}
    assert how in ("handover", "term-start"), how
    if how == "term-start":
        old.send_signal(signal.SIGTERM)
    new = spawn(r)
    log = r.stderr

    def took_over() -> bool:
        assert new.poll() is None, f"the new receiver exited with {new.returncode}:\n{tail(log)}"
        return TOOK_OVER in log.read_text(errors="replace")

    wait_until(took_over, timeout, "the new receiver never took the state directory over",
               explain=lambda: tail(log), every=0.02)
    took = time.monotonic() - t0
    old_status = old.wait(timeout)
    return {"takeover_s": round(took, 2), "old_exit": old_status}


def run(workdir: Path, how: str, *, rate: float = 100, seconds: float = 20, at: float = 10, calls: int = 9,
        interval: float = 0.3, extra: tuple[str, ...] = (), app_env: Optional[dict[str, str]] = None
        ) -> dict[str, Any]:
    """The app at `rate` traces a second for `seconds`, the receiver restarted `how` at `at` s;
    what the backend got (S.delivery) with the restart's timings, refusals and the SDK's drops."""
    backend = CountingBackend()
    r = receiver(backend, workdir, *extra).start()
    prober: Optional[Prober] = None
    try:
        start = time.monotonic()
        app = start_load_app(r.port, workdir, rate=rate, seconds=seconds, calls=calls, interval=interval,
                             app_env=app_env)
        time.sleep(max(0.0, start + at - time.monotonic()))
        prober = Prober(r.port).start()
        clock = LogClock(workdir).start()
        t0 = time.monotonic()
        timings = restart(r, how)
        time.sleep(2.0)
        prober.stop()
        result = app.result(timeout=300)
        clock.stop()
        try:
            row = S.wait_delivered(backend, result, 60, quiet=15).row()
        except AssertionError:  # spans missing for good: count what arrived
            row = S.delivery(backend, result).row()
        row.update(timings, refused_connects=prober.refused, port_closed_s=round(prober.longest, 3),
                   exporter_retries=result.get("exporter_retries"), exporter_failures=result.get("exporter_failures"),
                   sdk_queue_full=bool(result.get("sdk_queue_full")))
        exports = result.get("exports") or []
        row["slowest_export_s"] = max((took for _, took, _ in exports), default=0.0)
        row.update(when_lost(backend, result, t0, timings))
        row.update(unjudged_seen(backend, result))
        row["timeline"] = timeline(t0, clock, result)
        return row
    finally:
        if prober is not None:
            prober.stop()
        r.stop()
        backend.down()
