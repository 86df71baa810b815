#!/usr/bin/env python
"""Latency the MCP proxy adds to a tools/call, against the same client and server direct.

    .venv/bin/python bench/bench_mcp.py [--calls 300] [--rounds 3] [--json]

The MCP SDK's real client calls a real SDK server (research/conventions/mcp_server.py) over
stdio, direct and through `otel-loopguard mcp-proxy` (observe and enforce), and over streamable
HTTP, direct and through the proxy (observe); the proxy exports its spans over OTLP/gRPC to a
do-nothing receiver in this process. HTTP setups are compared with HTTP direct. Each call's time is from
`call_tool` to its answer; the calls differ (order ids), so none is judged a loop. Setups take
turns, round after round; figures are reported next to the direct baseline of the same run;
nothing asserts on time (`--calls 5 --rounds 1` is the smoke size).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, str(ROOT / "research" / "conventions" / "mcp_server.py")]
KEY = "0123456789abcdef0123456789abcdef"


class _NullReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC's name)
        return trace_service_pb2.ExportTraceServiceResponse()


def _receiver() -> tuple[Any, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_NullReceiver(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, port


def _command(setup: str) -> list[str]:
    if setup == "direct":
        return SERVER
    return [sys.executable, "-m", "otel_loopguard.cli", "mcp-proxy", "--mode", setup, "--", *SERVER]


def _env(port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_EXPORTER_OTLP_INSECURE": "true",
                "OTEL_LOOPGUARD_KEY": KEY, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1,localhost"})
    return env


async def _session(setup: str, calls: int, port: int) -> list[float]:
    """Seconds per call, after one warm-up call."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = _command(setup)
    params = StdioServerParameters(command=command[0], args=command[1:], env=_env(port), cwd=str(ROOT))
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write):
            async with ClientSession(read, write) as session:
                return await _timed_calls(session, calls)


async def _http_session(url: str, calls: int) -> list[float]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            return await _timed_calls(session, calls)


async def _timed_calls(session: Any, calls: int) -> list[float]:
    """One warm-up call, then `calls` timed ones, each with other arguments."""
    await session.initialize()
    await session.call_tool("lookup_order", {"order_id": "warm-up"})
    times = []
    for i in range(calls):
        start = time.perf_counter()
        await session.call_tool("lookup_order", {"order_id": f"A-{i}"})
        times.append(time.perf_counter() - start)
    return times


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int, proc: Any) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def _http_stack(otlp_port: int) -> tuple[list[Any], str, str]:
    """The server over streamable HTTP and an observing proxy before it: (processes, direct, proxied)."""
    import subprocess

    server_port, proxy_port = _free_port(), _free_port()
    code = (f"import sys; sys.path.insert(0, {str(SERVER[1].rsplit('/', 1)[0])!r}); import mcp_server; "
            f"mcp_server.build().run('streamable-http', host='127.0.0.1', port={server_port})")
    server = subprocess.Popen([sys.executable, "-c", code], env=_env(otlp_port), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    _listening(server_port, server)
    proxy = subprocess.Popen([sys.executable, "-m", "otel_loopguard.cli", "mcp-proxy", "--mode", "observe", "--listen",
                              f"127.0.0.1:{proxy_port}", "--upstream", f"http://127.0.0.1:{server_port}/mcp"],
                             cwd=ROOT, env=_env(otlp_port), stderr=subprocess.DEVNULL)
    _listening(proxy_port, proxy)
    return [proxy, server], f"http://127.0.0.1:{server_port}/mcp", f"http://127.0.0.1:{proxy_port}/mcp"


def measure(calls: int, rounds: int, http: bool = True) -> dict[str, Any]:
    import anyio

    server, port = _receiver()
    setups = ("direct", "observe", "enforce")
    times: dict[str, list[float]] = {s: [] for s in (*setups, *(("http direct", "http observe") if http else ()))}
    procs: list[Any] = []
    try:
        if http:
            procs, direct_url, proxy_url = _http_stack(port)
        for _ in range(rounds):
            for setup in setups:
                times[setup] += anyio.run(_session, setup, calls, port)
            if http:
                times["http direct"] += anyio.run(_http_session, direct_url, calls)
                times["http observe"] += anyio.run(_http_session, proxy_url, calls)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=20)
        server.stop(0)
    return _report(times, calls, rounds)


def _report(times: dict[str, list[float]], calls: int, rounds: int) -> dict[str, Any]:
    """Each stdio setup against stdio direct, each HTTP setup against HTTP direct."""
    out: dict[str, Any] = {"calls_per_round": calls, "rounds": rounds, "python": platform.python_version(),
                           "cpus": os.cpu_count(), "setups": {}}
    for setup, values in times.items():
        base = statistics.median(times["http direct" if setup.startswith("http") else "direct"])
        median = statistics.median(values)
        out["setups"][setup] = {"median_us": round(median * 1e6, 1),
                                "p90_us": round(sorted(values)[int(len(values) * 0.9)] * 1e6, 1),
                                "ratio_to_direct": round(median / base, 2),
                                "added_us": round((median - base) * 1e6, 1)}
    return out


def session_cost(calls: int) -> dict[str, float]:
    """CPU per tools/call of the proxy's own work, in this process: Session.from_client and
    from_server on a request and its answer (span, guard, tags, export to a do-nothing
    exporter), next to the framing and a json.loads of both lines alone (what any relay that
    looks at messages pays)."""
    sys.path.insert(0, str(ROOT))
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from otel_loopguard.enforce import make_guard
    from otel_loopguard.mcp.framing import LineSplitter, parse
    from otel_loopguard.mcp.session import Session
    from otel_loopguard.mcp.spans import CallSpans
    from otel_loopguard.processor import install

    class Null(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Null(), max_queue_size=100_000, schedule_delay_millis=50))
    install(tracer_provider=provider, key=KEY, mode="observe", run_id_attribute="mcp.session.id")
    session = Session(CallSpans(provider.get_tracer("bench"), "bench"), make_guard(mode="observe", key=KEY))
    pairs = [(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                          "params": {"name": "lookup_order", "arguments": {"order_id": f"A-{i}"}}}).encode() + b"\n",
              json.dumps({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": f"order A-{i}: shipped"}],
                                                                 "isError": False}}).encode() + b"\n") for i in range(calls)]
    client, server = LineSplitter(), LineSplitter()
    start = time.process_time()
    for request, answer in pairs:
        for piece in client.feed(request):
            parse(piece.data)
        for piece in server.feed(answer):
            parse(piece.data)
    baseline = (time.process_time() - start) / calls
    start = time.process_time()
    for request, answer in pairs:
        for piece in client.feed(request):
            session.from_client(piece)
        for piece in server.feed(answer):
            session.from_server(piece)
    provider.force_flush()
    proxy = (time.process_time() - start) / calls
    provider.shutdown()
    return {"framing_and_parse_us": round(baseline * 1e6, 1), "proxy_us": round(proxy * 1e6, 1),
            "ratio": round(proxy / baseline, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.calls, args.rounds)
    report["cpu_per_call"] = session_cost(max(args.calls * args.rounds, 100))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"tools/call latency, {args.calls} calls x {args.rounds} rounds, median per call")
    print(f"{'setup':<13} {'median us':>10} {'p90 us':>10} {'x direct':>9} {'added us':>9}")
    for setup, row in report["setups"].items():
        print(f"{setup:<13} {row['median_us']:>10} {row['p90_us']:>10} {row['ratio_to_direct']:>9} {row['added_us']:>9}")
    cpu = report["cpu_per_call"]
    print(f"CPU per call in the proxy (process time, incl. the export thread): {cpu['proxy_us']} us; "
          f"framing and json.loads alone: {cpu['framing_and_parse_us']} us ({cpu['ratio']}x)")


if __name__ == "__main__":
    main()
