"""The receiver through failures, counted: what an app on the SDK's default exporter loses.

Real processes on loopback: the agent app of tests/collector/app.py (`otel_loopguard.install()`
and the SDK's default OTLP exporter, 20 runs a second, 13 spans a run, every other run a loop)
sends straight to `otel-loopguard serve --forward`, which forwards to the counting backend of
tests/collector/backend.py. Each scenario prints created / delivered / lost / duplicated
spans, loops stopped, runs marked incomplete, runs without a summary, and the receiver's
largest resident memory (VmHWM).

  .venv/bin/python bench/chaos.py                 # every scenario, about 30 minutes
  .venv/bin/python bench/chaos.py outage sigkill  # some of them
  .venv/bin/python bench/chaos.py --nice -10 restart-handover  # ahead of other work on the machine (root)

Scenarios (the receiver with its defaults unless named):
- outage:       the backend down 30 s while the app sends (the forward queue absorbs it);
- outage-sync:  the same with --forward-queue-bytes 0 (answer only once delivered);
- sigterm:      the receiver SIGTERMed mid-stream and restarted at once;
- sigkill:      the same with SIGKILL.
With a state directory (--state-dir) and a slow backend (300 ms a request), the app with the
processor or on the plain SDK (`-plain`: untagged spans, no sequence numbers):
- sigterm-slow / sigkill-slow:              in memory (the control);
- sigterm-state / sigkill-state[-plain]:    with --state-dir;
- sigkill-slow-sync / sigkill-state-sync[-plain]: the synchronous mode (--forward-queue-bytes 0),
                                            where duplicates appeared before the state directory;
- outage-sigkill / outage-sigkill-state:    SIGKILL in the middle of a 30 s outage.
- overload:     no app: eight senders flood `serve --memory-limit-mib 256` with fresh spans for
                60 s (each sends its next 512-span batch as soon as the last is answered, about
                80 times the app's rate; a quarter of the traces are runs that never complete),
                then 40 s of quiet, then a second 60 s flood: resident memory per burst against
                the bound, and after each quiet spell (dedupe entries and late cache kept 30 s),
                and every span accepted counted at the backend (tests/reliability/flood.py).
                PYTHONMALLOC=pymalloc in the environment runs the receiver on CPython's allocator;
                by default `serve` uses glibc's (receiver/ops/trim.py);
- huge:         one request of 100,000 spans while another sender sends 512-span requests:
                how long the small requests wait meanwhile, and resident memory.
With the load of issue 27 (tests/reliability/load_app.py: 100 new traces a second, a tool call
every 0.3 s in each of about 270 open traces, 9 a trace, the SDK's default exporter) straight to
`serve --state-dir`, restarted at 10 s of 20 (tests/reliability/handover.py):
- restart-stop-start: SIGTERM, then a new process once the old one exited (the old way);
- restart-kill:       SIGKILL, then a new process at once;
- restart-handover:   a new process started beside the running one: it listens on the same port
                      (SO_REUSEPORT), the old one stops, the new one takes the state over;
- restart-kill-queue8k: restart-kill with the app's queue at 8,192 spans (OTEL_BSP_MAX_QUEUE_SIZE);
- restart-term-start: SIGTERM and a new process started at the same moment;
- restart-term-start-wait: the same with --handover-wait-seconds 5;
- restart-none:       no restart (the baseline: what the load costs the machine alone).
Figures: docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from collector import scenarios as S  # noqa: E402
from collector.backend import CountingBackend  # noqa: E402
from live import ReceiverProcess  # noqa: E402
from reliability import flood as F  # noqa: E402
from reliability import handover as H  # noqa: E402

RUNS, RATE = 1000, 20.0  # 50 s of traffic


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def run(work: Path, args: list[str], during: Callable[[CountingBackend, ReceiverProcess, float], None],
        delay: float = 0.0, processor: bool = True) -> dict[str, Any]:
    backend = CountingBackend(delay=delay)
    args = [a.replace("STATE", str(work / "state")) for a in args]
    receiver = ReceiverProcess(["--forward", backend.address, "--root-grace-seconds", "1", *args], S.receiver_env(),
                               work).start()
    rss = 0.0
    try:
        start = time.monotonic()
        app = S.start_app(receiver.port, work, runs=RUNS, rate=RATE, processor=processor)
        during(backend, receiver, start)
        result = app.result(timeout=300)
        rss = max(peak_rss_mib(receiver.proc.pid), getattr(receiver, "peak_rss", 0.0))
        row = S.wait_delivered(backend, result, 180, quiet=15).row()
    except AssertionError as lost:  # spans missing for good: count what arrived
        row = S.delivery(backend, result).row() if "result" in locals() else {"error": str(lost)[:200]}
    finally:
        receiver.stop()
        backend.down()
    row["receiver_peak_rss_mib"] = rss
    return row


def outage(backend: CountingBackend, _receiver: ReceiverProcess, start: float) -> None:
    time.sleep(max(0.0, start + 5 - time.monotonic()))
    backend.down()
    time.sleep(30)
    backend.up()


def _restart(receiver: ReceiverProcess, sig: int) -> None:
    # The first process's peak memory, before it is gone (the row reports the larger of the two).
    receiver.peak_rss = max(getattr(receiver, "peak_rss", 0.0), peak_rss_mib(receiver.proc.pid))  # type: ignore[attr-defined]
    receiver.stop(sig)
    receiver.start()


def restart(sig: int) -> Callable[[CountingBackend, ReceiverProcess, float], None]:
    def during(_backend: CountingBackend, receiver: ReceiverProcess, start: float) -> None:
        time.sleep(max(0.0, start + 20 - time.monotonic()))
        _restart(receiver, sig)

    return during


def outage_with_crash(backend: CountingBackend, receiver: ReceiverProcess, start: float) -> None:
    """The backend down from 5 s to 35 s; the receiver SIGKILLed at 20 s, with a queue to keep."""
    time.sleep(max(0.0, start + 5 - time.monotonic()))
    backend.down()
    time.sleep(max(0.0, start + 20 - time.monotonic()))
    _restart(receiver, signal.SIGKILL)
    time.sleep(max(0.0, start + 35 - time.monotonic()))
    backend.up()


SLOW = 0.3  # seconds a request at the slow backend
STATE = ["--state-dir", "STATE"]
Scenario = tuple[list[str], Callable[[CountingBackend, ReceiverProcess, float], None], float, bool]
SCENARIOS: dict[str, Scenario] = {
    "outage": ([], outage, 0.0, True),
    "outage-sync": (["--forward-queue-bytes", "0"], outage, 0.0, True),
    "sigterm": ([], restart(signal.SIGTERM), 0.0, True),
    "sigkill": ([], restart(signal.SIGKILL), 0.0, True),
    "sigterm-slow": ([], restart(signal.SIGTERM), SLOW, True),
    "sigkill-slow": ([], restart(signal.SIGKILL), SLOW, True),
    "sigterm-state": (STATE, restart(signal.SIGTERM), SLOW, True),
    "sigkill-state": (STATE, restart(signal.SIGKILL), SLOW, True),
    "sigterm-state-plain": (STATE, restart(signal.SIGTERM), SLOW, False),
    "sigkill-state-plain": (STATE, restart(signal.SIGKILL), SLOW, False),
    "sigkill-slow-plain": ([], restart(signal.SIGKILL), SLOW, False),
    "sigkill-slow-sync": (["--forward-queue-bytes", "0"], restart(signal.SIGKILL), SLOW, True),
    "sigkill-state-sync": (["--forward-queue-bytes", "0", *STATE], restart(signal.SIGKILL), SLOW, True),
    "sigkill-state-sync-plain": (["--forward-queue-bytes", "0", *STATE], restart(signal.SIGKILL), SLOW, False),
    "outage-sigkill": ([], outage_with_crash, 0.0, True),
    "outage-sigkill-state": (STATE, outage_with_crash, 0.0, True),
}


def overload_row(work: Path) -> dict[str, Any]:
    env = S.receiver_env()
    env["OTEL_LOOPGUARD_DEDUPE_SECONDS"] = "30"  # entries leave within the quiet spell
    env["OTEL_LOOPGUARD_LATE_CACHE_SECONDS"] = "30"  # and so do the side tables' (receiver/runs/assembly.py)
    result = F.overload(work, env, limit_mib=256, seconds=60, quiet=40, bursts=2, senders=8)
    return result.row()


def _steady(address: str, stop: Any, out: Any) -> None:
    """The other sender, in a process of its own: in the bench's process it would share a GIL
    with the counting sink, which parses the huge request when it is forwarded."""
    import grpc

    small = F.template()
    channel = grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)])
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    waits: list[tuple[float, float]] = []
    while not stop.is_set():
        started = time.time()
        export(F.fresh(small), timeout=60)
        waits.append((started, time.time() - started))
        time.sleep(0.05)
    channel.close()
    out.send(waits)


def _huge_request() -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    spans = list(ExportTraceServiceRequest.FromString(F.template()).resource_spans[0].scope_spans[0].spans)
    big = ExportTraceServiceRequest()
    scope = big.resource_spans.add().scope_spans.add()
    for n in range(100_000 // len(spans) + 1):
        for s in spans:
            scope.spans.add().CopyFrom(s)
            scope.spans[-1].trace_id = n.to_bytes(4, "big") + s.trace_id[4:]
    del scope.spans[100_000:]
    return big.SerializeToString()


def huge_row(work: Path) -> dict[str, Any]:
    """One 100k-span request beside a steady sender: the small requests' worst wait."""
    import multiprocessing

    import grpc

    sink = F.CountingSink()
    receiver = ReceiverProcess(["--forward", sink.address, "--max-request-spans", "100000"], S.receiver_env(),
                               work).start()
    data = _huge_request()
    spawn = multiprocessing.get_context("spawn")
    stop, (mine, theirs) = spawn.Event(), spawn.Pipe(duplex=False)
    other = spawn.Process(target=_steady, args=(receiver.address, stop, theirs), daemon=True)
    channel = grpc.insecure_channel(receiver.address, options=[("grpc.enable_http_proxy", 0)])
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    try:
        assert receiver.proc is not None
        baseline = F.rss_mib(receiver.proc.pid)
        other.start()
        time.sleep(4)
        sent = time.time()
        export(data, timeout=120)
        answered = time.time()
        time.sleep(3)
        stop.set()
        waits = mine.recv()
        other.join(60)
        before = [w for t, w in waits if t + w < sent]
        during = [w for t, w in waits if t + w >= sent and t <= answered + 1]
        return {"request_mib": round(len(data) / 2**20, 1), "huge_request_s": round(answered - sent, 2),
                "small_wait_before_max_s": round(max(before), 3), "small_wait_during_max_s": round(max(during), 3),
                "small_requests_during": len(during), "small_waits_over_80ms": [(round(t - sent, 2), round(w, 3)) for t, w in waits if w > 0.08], "rss_baseline_mib": round(baseline, 1),
                "rss_peak_mib": F.rss_mib(receiver.proc.pid, "VmHWM"), "rss_after_mib": round(F.rss_mib(receiver.proc.pid), 1)}
    finally:
        channel.close()
        receiver.stop()
        sink.stop()


def restart_row(how: str, *extra: str, **app_env: str) -> Callable[[Path], dict[str, Any]]:
    """The load of issue 27 (100 new traces a second, one tool call every 0.3 s in each of about 270
    open traces, the SDK's default exporter) straight to `serve --state-dir`, restarted at 10 s of
    20 (tests/reliability/handover.py)."""
    return lambda work: H.run(work, how, rate=100, seconds=20, at=10, extra=extra, app_env=app_env)


OTHERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "overload": overload_row, "huge": huge_row, "restart-stop-start": restart_row("stop-start"),
    "restart-kill": restart_row("kill-start"), "restart-handover": restart_row("handover"),
    "restart-kill-queue8k": restart_row("kill-start", OTEL_BSP_MAX_QUEUE_SIZE="8192"),
    "restart-term-start": restart_row("term-start"),
    "restart-term-start-wait": restart_row("term-start", "--handover-wait-seconds", "5"),
    "restart-none": restart_row("none")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*", help=f"scenarios to run (default all): {', '.join([*SCENARIOS, *OTHERS])}")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--nice", type=int, default=None,
                        help="run the scenarios' processes (app, receivers, backend) at this nice value, e.g. -10 "
                             "(root): their CPU as on a machine of their own, when other work shares it")
    args = parser.parse_args()
    if args.nice is not None:  # the processes started from here inherit it
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)
    unknown = set(args.names) - set(SCENARIOS) - set(OTHERS)
    if unknown:
        parser.error(f"unknown scenario {', '.join(sorted(unknown))}; known: {', '.join([*SCENARIOS, *OTHERS])}")
    out = {}
    for name in args.names or [*SCENARIOS, *OTHERS]:
        with tempfile.TemporaryDirectory() as tmp:
            if name in OTHERS:
                out[name] = OTHERS[name](Path(tmp))
            else:
                extra, during, delay, processor = SCENARIOS[name]
                out[name] = run(Path(tmp), extra, during, delay, processor)
        if not args.json:
            print(f"{name:12} {out[name]}", flush=True)
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
