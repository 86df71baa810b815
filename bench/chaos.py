"""The receiver through failures, counted: what an app on the SDK's default exporter loses.

Real processes on loopback: the agent app of tests/collector/app.py (`otel_loopguard.install()`
and the SDK's default OTLP exporter, 20 runs a second, 13 spans a run, every other run a loop)
sends straight to `otel-loopguard serve --forward`, which forwards to the counting backend of
tests/collector/backend.py. Each scenario prints created / delivered / lost / duplicated
spans, loops stopped, runs marked incomplete, runs without a summary, and the receiver's
largest resident memory (VmHWM).

  .venv/bin/python bench/chaos.py                 # every scenario, about 4 minutes
  .venv/bin/python bench/chaos.py outage sigkill  # some of them

Scenarios (the receiver with its defaults unless named):
- outage:       the backend down 30 s while the app sends (the forward queue absorbs it);
- outage-sync:  the same with --forward-queue-bytes 0 (answer only once delivered);
- sigterm:      the receiver SIGTERMed mid-stream and restarted at once;
- sigkill:      the same with SIGKILL.
Figures: docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
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

RUNS, RATE = 1000, 20.0  # 50 s of traffic


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def run(work: Path, args: list[str], during: Callable[[CountingBackend, ReceiverProcess, float], None]) -> dict[str, Any]:
    backend = CountingBackend()
    receiver = ReceiverProcess(["--forward", backend.address, "--root-grace-seconds", "1", *args], S.receiver_env(),
                               work).start()
    rss = 0.0
    try:
        start = time.monotonic()
        app = S.start_app(receiver.port, work, runs=RUNS, rate=RATE)
        during(backend, receiver, start)
        result = app.result(timeout=300)
        rss = peak_rss_mib(receiver.proc.pid)
        row = S.wait_delivered(backend, result, 120, quiet=15).row()
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


def restart(sig: int) -> Callable[[CountingBackend, ReceiverProcess, float], None]:
    def during(_backend: CountingBackend, receiver: ReceiverProcess, start: float) -> None:
        time.sleep(max(0.0, start + 20 - time.monotonic()))
        receiver.stop(sig)
        receiver.start()

    return during


SCENARIOS: dict[str, tuple[list[str], Callable[[CountingBackend, ReceiverProcess, float], None]]] = {
    "outage": ([], outage),
    "outage-sync": (["--forward-queue-bytes", "0"], outage),
    "sigterm": ([], restart(signal.SIGTERM)),
    "sigkill": ([], restart(signal.SIGKILL)),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*", help=f"scenarios to run (default all): {', '.join(SCENARIOS)}")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unknown = set(args.names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario {', '.join(sorted(unknown))}; known: {', '.join(SCENARIOS)}")
    out = {}
    for name in args.names or list(SCENARIOS):
        with tempfile.TemporaryDirectory() as tmp:
            extra, during = SCENARIOS[name]
            out[name] = run(Path(tmp), extra, during)
        if not args.json:
            print(f"{name:12} {out[name]}", flush=True)
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
