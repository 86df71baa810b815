"""The receiver beside the real OpenTelemetry Collector, on the same recorded spans, in one run.

Three pipelines, each fed the same requests (the recorded real captures of bench_receiver.py,
512 spans a request) by 4 sender threads, each delivering to the counting backend of
tests/collector/backend.py:

1. collector  : sender -> Collector (otlp -> memory_limiter, batch -> otlp, no compression) ->
                backend: its own OTLP passthrough, the yardstick;
2. inline     : sender -> Collector -> `otel-loopguard serve --forward` -> Collector -> backend,
                collector_config/inline-with-collector.yaml as shipped (queues on disk);
   inline_memory: the same with the Collector's queues in memory and no gzip to the backend;
3. receiver   : sender -> `otel-loopguard serve --forward` -> backend, the receiver alone.

For each: spans/s (all spans sent, until the backend has them all) and the CPU seconds each
process used (utime + stime from /proc/<pid>/stat), as spans per CPU-second. The headline is
the receiver's spans per CPU-second over the Collector passthrough's. Wall figures depend on
the machine and on the senders and backend sharing its cores; per CPU-second figures less so.

  .venv/bin/python bench/bench_collector.py [--copies N] [--json]
  .venv/bin/python bench/bench_collector.py --scenarios   # the outage and restart counts as well

Needs the Collector build (bash scripts/otelcol.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from collector import scenarios as S  # noqa: E402
from collector.backend import CountingBackend  # noqa: E402
from collector.otelcol import Collector, Filled, fill  # noqa: E402
from live import ReceiverProcess, wait_until  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
SENDERS = 4


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of the file)


def send_all(port: int, payloads: Sequence[bytes]) -> None:
    threads = [threading.Thread(target=S.send_raw, args=(port, payloads[i::SENDERS])) for i in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def passthrough(workdir: Path, backend: CountingBackend) -> Collector:
    """The Collector alone: fanout.yaml's otlp receiver, processors and backend exporter, nothing else."""
    filled = fill("fanout.yaml", backend=backend.address, loopguard=["127.0.0.1:1"])
    doc = filled.doc
    doc["receivers"] = {"otlp": doc["receivers"]["otlp"]}
    # No compression, as the receiver forwards (the exporter's default, gzip, costs the Collector
    # more CPU than the rest of its path on these spans).
    doc["exporters"] = {"otlp/backend": {**doc["exporters"]["otlp/backend"], "compression": "none"}}
    doc["service"]["pipelines"] = {"traces": {"receivers": ["otlp"], "processors": ["memory_limiter", "batch"],
                                              "exporters": ["otlp/backend"]}}
    return Collector(Filled(doc, filled.ports), workdir).start()


def measure(label: str, entry: int, procs: dict[str, int], backend: CountingBackend, payloads: Sequence[bytes],
            spans: int) -> dict[str, Any]:
    before = {name: cpu_seconds(pid) for name, pid in procs.items()}
    t0 = time.monotonic()
    send_all(entry, payloads)
    wait_until(lambda: sum(backend.app_counts().values()) >= spans, 300, f"{label}: the backend did not get every span",
               every=0.05)
    wall = time.monotonic() - t0
    cpu = {name: cpu_seconds(pid) - before[name] for name, pid in procs.items()}
    row: dict[str, Any] = {"spans": spans, "seconds": round(wall, 2), "spans_per_s": round(spans / wall)}
    for name, seconds in cpu.items():
        row[f"{name}_cpu_s"] = round(seconds, 2)
        row[f"{name}_spans_per_cpu_s"] = round(spans / seconds) if seconds else None
    return row


def run(copies: int) -> dict[str, Any]:
    os.environ.setdefault("OTEL_LOOPGUARD_KEY", S.KEY)
    payloads = S.bench_mix(copies, 0)
    spans = sum(_count(p) for p in payloads)
    out: dict[str, Any] = {"spans": spans, "requests": len(payloads), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out["collector"] = _collector_only(work / "a", payloads, spans)
        out["inline"] = _inline(work / "b", payloads, spans)
        out["inline_memory"] = _inline(work / "b2", payloads, spans, on_disk=False)
        out["receiver"] = _receiver_only(work / "c", payloads, spans)
    base = out["collector"]["collector_spans_per_cpu_s"]
    out["receiver_vs_collector_per_cpu_s"] = round(out["receiver"]["receiver_spans_per_cpu_s"] / base, 3)
    return out


def _count(data: bytes) -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return sum(len(ss.spans) for rs in ExportTraceServiceRequest.FromString(data).resource_spans for ss in rs.scope_spans)


def _collector_only(work: Path, payloads: Sequence[bytes], spans: int) -> dict[str, Any]:
    work.mkdir(parents=True)
    backend = CountingBackend()
    collector = passthrough(work, backend)
    try:
        return measure("collector", collector.port("otlp"), {"collector": collector.proc.pid}, backend, payloads, spans)
    finally:
        collector.stop()
        backend.down()


def _inline(work: Path, payloads: Sequence[bytes], spans: int, on_disk: bool = True) -> dict[str, Any]:
    work.mkdir(parents=True)
    backend = CountingBackend()
    receiver = ReceiverProcess([], S.receiver_env(), work)
    filled = fill("inline-with-collector.yaml", backend=backend.address, loopguard=[receiver.address],
                  storage=work / "file_storage")
    for exporter in ("otlp/loopguard",):  # the bench receiver serves plaintext: no TLS or token to measure
        filled.doc["exporters"][exporter]["tls"] = {"insecure": True}
        filled.doc["exporters"][exporter].pop("headers", None)
    if not on_disk:  # the queues in memory (the exporters' default) and no gzip: the Collector's least work
        for exporter in filled.doc["exporters"].values():
            exporter["sending_queue"].pop("storage", None)
            exporter["compression"] = "none"
    receiver.args = ["--forward", f"127.0.0.1:{filled.ports['otlp/guarded']}", "--forward-queue-bytes", "0"]
    collector = Collector(filled, work).start()
    receiver.start()
    try:
        return measure("inline", collector.port("otlp"), {"collector": collector.proc.pid, "receiver": receiver.proc.pid},
                       backend, payloads, spans)
    finally:
        receiver.stop()
        collector.stop()
        backend.down()


def _receiver_only(work: Path, payloads: Sequence[bytes], spans: int) -> dict[str, Any]:
    work.mkdir(parents=True)
    backend = CountingBackend()
    receiver = ReceiverProcess(["--forward", backend.address], S.receiver_env(), work).start()
    try:
        return measure("receiver", receiver.port, {"receiver": receiver.proc.pid}, backend, payloads, spans)
    finally:
        receiver.stop()
        backend.down()


def scenarios() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "restart").mkdir()
        (work / "outage").mkdir()
        return {"shard_restart": S.shard_restart(work / "restart").row(),
                "store_and_forward": S.store_and_forward(work / "outage").row()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=100, help="copies of each recorded trace (about 100 spans each)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scenarios", action="store_true", help="also run the outage and restart scenarios (2-3 min)")
    args = parser.parse_args()
    result = run(args.copies)
    if args.scenarios:
        result["scenarios"] = scenarios()
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['spans']:,} recorded spans in {result['requests']} requests, {result['cpus']} cpus")
    for label in ("collector", "inline", "inline_memory", "receiver"):
        r = result[label]
        procs = ", ".join(f"{k[:-len('_spans_per_cpu_s')]} {v:,} spans/CPU-s" for k, v in r.items()
                          if k.endswith("_spans_per_cpu_s"))
        print(f"{label:13}: {r['spans_per_s']:>8,} spans/s   {procs}")
    print(f"receiver / Collector passthrough, spans per CPU-second: {result['receiver_vs_collector_per_cpu_s']}")
    for name, row in result.get("scenarios", {}).items():
        print(f"{name}: {row}")


if __name__ == "__main__":
    main()
