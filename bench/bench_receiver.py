#!/usr/bin/env python
"""Benchmark of the receiver: throughput, finding latency, memory per held call.

    .venv/bin/python bench/bench_receiver.py          # table
    .venv/bin/python bench/bench_receiver.py --json

1. Pipeline throughput (spans/s, one process, no transport): validate and decode
   (as the service does) -> dedupe -> assemble -> detect -> finding spans, on a
   realistic agent-trace mix (tool, model, chain and HTTP spans with typical
   attribute counts), side by side with
   a naive passthrough measured in the same process: parse -> read every
   attribute -> re-serialise. Untagged spans (apps without the processor) and
   processor-tagged spans (digests present) are measured separately. The decode
   step alone is measured too: what any detection built on it pays at least.
2. End-to-end: requests sent over gRPC by a separate process to the real
   receiver (inline mode, a real gRPC sink downstream); spans/s and the latency
   from sending the request that completes a loop's evidence to the finding span
   reaching the sink (p50/p99 over many loops).
3. Memory per held (untagged) call: tracemalloc of a run holding 10k calls.

Timings are reported with their baseline; nothing asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import multiprocessing
import os
import platform
import sys
import threading
import time
import tracemalloc
from concurrent import futures
from pathlib import Path
from typing import Any, Iterator

# The checkout this script is in, before any installed copy: an editable install may point at
# another checkout, whose code would then be measured instead.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.otlp.values import attributes, to_any_value, to_key_values
from otel_loopguard.policy import Policy
from otel_loopguard.receiver.runs.assembly import RunAssembler
from otel_loopguard.receiver.config import ReceiverConfig
from otel_loopguard.receiver.ingest import decoder as decode_module
from otel_loopguard.receiver.ingest.decode import path as decode_path
from otel_loopguard.receiver.ingest.decoder import decode
from otel_loopguard.receiver.ingest.dedupe import SpanDeduper
from otel_loopguard.receiver.ops import pauses
from otel_loopguard.receiver.ops.metrics import Metrics
from otel_loopguard.receiver.front.service import parse_request

KEY = b"bench-key-0123456789abcdef"
NATIVE_DECODE = decode_path() == "native"
SPANS_PER_REQUEST = 512


# -- a realistic mix -------------------------------------------------------------------
def _kv(key: str, value: Any) -> KeyValue:
    return KeyValue(key=key, value=to_any_value(value))


def _span(trace: bytes, sid: int, parent: int, name: str, t: int, attrs: dict[str, Any]) -> Span:
    return Span(
        trace_id=trace,
        span_id=sid.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=t,
        end_time_unix_nano=t + 1_000_000,
        attributes=[_kv(k, v) for k, v in attrs.items()],
    )


def agent_trace(n: int, turns: int, tagged: bool, looping: bool, extra_chain: int = 0) -> list[Span]:
    """One run: a root, and per turn a chat span, an HTTP span, a tool span, a chain span
    (plus `extra_chain` more framework spans per turn, as LangChain-style stacks emit)."""
    trace = (n + 1).to_bytes(16, "big")
    base, sid = 1_700_000_000_000_000_000 + n * 10**12, n * 1000 + 1
    root = sid
    spans = [_span(trace, root, 0, "invoke_agent support", base, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"})]
    for turn in range(1, turns + 1):
        t = base + turn * 10_000_000
        chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x", "gen_ai.response.model": "gpt-x",
                "gen_ai.usage.input_tokens": 1200 + turn, "gen_ai.usage.output_tokens": 40, "gen_ai.system": "openai",
                "gen_ai.response.id": f"resp-{n}-{turn}", "gen_ai.response.finish_reasons": "tool_calls",
                "server.address": "api.example", "server.port": 443, "gen_ai.request.temperature": 0, "gen_ai.request.max_tokens": 512}
        spans.append(_span(trace, sid + 4 * turn - 3, root, "chat gpt-x", t, chat))
        http = {"http.request.method": "POST", "url.full": "https://api.example/v1/chat", "http.response.status_code": 200,
                "server.address": "api.example", "server.port": 443, "network.protocol.version": "1.1",
                "user_agent.original": "python-httpx/0.27", "http.request.body.size": 4096, "http.response.body.size": 900,
                "url.scheme": "https"}
        spans.append(_span(trace, sid + 4 * turn - 2, sid + 4 * turn - 3, "POST", t + 1000, http))
        q = "A12" if looping else f"order-{turn}"
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                "gen_ai.tool.call.id": f"call_{n}_{turn}", "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": json.dumps({"order_id": q, "include_items": True}),
                "gen_ai.tool.call.result": json.dumps({"status": "delivered", "version": 7 if looping else turn}),
                "code.function": "lookup_order", "thread.id": 1}
        if tagged:
            tool.update({"loopguard.seq": turn, "loopguard.turn": turn, "loopguard.run.id": trace.hex(),
                         "loopguard.args.digest": f"{hash(q) & (2**128 - 1):032x}",
                         "loopguard.result.digest": f"{hash((q, looping or turn)) & (2**128 - 1):032x}",
                         "loopguard.key.id": "bench", "loopguard.tool.name": "lookup_order",
                         "loopguard.outcome": "ok", "loopguard.mode": "observe"})
        spans.append(_span(trace, sid + 4 * turn - 1, root, "execute_tool lookup_order", t + 2_000_000, tool))
        chain = {"langchain.chain.type": "RunnableSequence", "app.step": turn, "app.tenant": "acme",
                 "app.session": f"s-{n}", "app.flow": "support", "app.version": "1.4.2"}
        spans.append(_span(trace, sid + 4 * turn, root, "chain step", t + 3_000_000, chain))
        for k in range(extra_chain):
            extra_id = (n + 1) * 10**7 + turn * 100 + k
            spans.append(_span(trace, extra_id, sid + 4 * turn, f"Runnable{k}", t + 3_100_000 + k, chain))
    spans[0].end_time_unix_nano = base + (turns + 1) * 10_000_000  # the root spans its turns: no clock skew
    return spans


def requests_for(runs: int, tagged: bool, turns: int = 8, first: int = 0, extra_chain: int = 0) -> list[bytes]:
    spans = [
        s for n in range(first, first + runs) for s in agent_trace(n, turns, tagged, n % 5 == 0, extra_chain)
    ]
    out = []
    for i in range(0, len(spans), SPANS_PER_REQUEST):
        ss = ScopeSpans(spans=spans[i : i + SPANS_PER_REQUEST])
        out.append(ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ss])]).SerializeToString())
    return out


# -- the recorded mix: spans real instrumentations emitted ------------------------------
CAPTURES = Path(__file__).resolve().parents[1] / "research" / "conventions" / "captures"
# One capture per instrumentation x framework pair the project supports, as recorded
# (research/conventions/): their real attribute counts, payload sizes and span shapes.
RECORDED = (
    "lc_openinference__sync__middleware", "lc_traceloop__sync__middleware",
    "oa_openinference__responses", "oa_otel_genai__responses", "oa_traceloop__responses",
)
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def _recorded_span(s: dict[str, Any], copy: int, base: int) -> Span:
    def sid(hex_id: str) -> bytes:  # a fresh, stable id per copy
        return (int(hex_id, 16) ^ (copy * 0x9E3779B97F4A7C15 & (2**64 - 1))).to_bytes(8, "big") if hex_id else b""

    trace = (int(s["trace_id"], 16) ^ copy).to_bytes(16, "big")
    return Span(
        trace_id=trace, span_id=sid(s["span_id"]), parent_span_id=sid(s.get("parent_span_id") or ""),
        name=s["name"], kind=getattr(Span, f"SPAN_KIND_{s['kind']}"),
        start_time_unix_nano=base + int(s["start_ms"] * 1e6), end_time_unix_nano=base + int(s["end_ms"] * 1e6),
        attributes=to_key_values(s["attributes"]),
        events=[Span.Event(name=e["name"], time_unix_nano=base,
                           attributes=to_key_values(e.get("attributes", {})))
                for e in s.get("events", [])],
        status={"code": _STATUS[s["status"]["code"]], "message": s["status"].get("description") or ""},
    )


def recorded_requests(copies: int) -> list[bytes]:
    """The recorded traces, `copies` times each under fresh ids, in 512-span requests."""
    traces = [json.loads((CAPTURES / f"{name}.json").read_text())["spans"] for name in RECORDED]
    spans = [_recorded_span(s, c, 1_700_000_000_000_000_000 + c * 10**12) for c in range(copies) for t in traces for s in t]
    return [
        ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans[i : i + SPANS_PER_REQUEST])])]).SerializeToString()
        for i in range(0, len(spans), SPANS_PER_REQUEST)
    ]


def plain_requests(runs: int) -> list[bytes]:
    """The HTTP, chain and framework spans of the framework-heavy mix, without its tool and model spans."""
    spans = [s for n in range(runs) for s in agent_trace(n, 8, True, False, 4)
             if s.name.startswith("Runnable") or s.name in ("POST", "chain step")]
    return [
        ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans[i : i + SPANS_PER_REQUEST])])]).SerializeToString()
        for i in range(0, len(spans), SPANS_PER_REQUEST)
    ]


# -- 1. pipeline throughput ------------------------------------------------------------
def naive(payloads: list[bytes]) -> None:
    for data in payloads:
        req = ExportTraceServiceRequest.FromString(data)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attributes(span.attributes)
        req.SerializeToString()


def pipeline(payloads: list[bytes]) -> int:
    metrics = Metrics()
    config = ReceiverConfig(forward="127.0.0.1:1")
    assembler = RunAssembler(Fingerprinter(load_key(key=KEY), Policy()), config, metrics)
    deduper = SpanDeduper(config.dedupe_size, config.dedupe_seconds)
    finding_spans = 0
    for data in payloads:
        decoded = parse_request(data, None)  # what the service does: validate and decode
        fresh = [d for d in decoded.spans if deduper.check(d.key, d.content) == "new"]
        deduper.remember_all((d.key, d.content) for d in fresh)
        finding_spans += len(assembler.accept(fresh))
    return finding_spans + len(assembler.flush())


def decode_only(payloads: list[bytes]) -> int:
    """The pipeline's first step alone (validate and decode, nothing judged): the floor any
    detection built on this decode pays, shown beside the naive passthrough."""
    return sum(len(parse_request(data, None).spans) for data in payloads)


@contextlib.contextmanager
def python_decode() -> Iterator[None]:
    """The receiver's decode on the Python reference for a while (the rest as chosen:
    the native canonical form and digest stay in use when the module is)."""
    saved, decode_module._native = decode_module._native, None  # noqa: SLF001 (the bench compares both paths)
    try:
        yield
    finally:
        decode_module._native = saved  # noqa: SLF001


def pipeline_python(payloads: list[bytes]) -> int:
    with python_decode():
        return pipeline(payloads)


def decode_only_python(payloads: list[bytes]) -> int:
    with python_decode():
        return decode_only(payloads)


def best_rates(fns: list[Any], payloads: list[bytes], spans: int, repeats: int = 7) -> list[float]:
    """spans/s of each function, best of `repeats`, the functions taking turns: a machine
    whose speed drifts during the run then drifts for all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            gc.collect()
            t0 = time.perf_counter()
            fn(payloads)
            best[i] = min(best[i], time.perf_counter() - t0)
    return [spans / b for b in best]


# The mixes by name (--pipeline-only): the requests of each for `runs` synthetic runs.
MIXES = {
    "untagged": lambda runs: requests_for(runs, False),
    "tagged": lambda runs: requests_for(runs, True),
    "framework": lambda runs: requests_for(runs, True, extra_chain=4),
    "recorded": lambda runs: recorded_requests(max(1, runs // 5)),
    "plain": plain_requests,
}


def throughput(runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # Half the spans are tool/model spans in the agent-heavy mix, a quarter in the framework-heavy one.
    mixes = [(label, requests_for(runs, tagged, extra_chain=extra))
             for tagged, extra, label in ((False, 0, "untagged"), (True, 0, "tagged"), (True, 4, "tagged+framework"))]
    mixes.append(("recorded", recorded_requests(max(1, runs // 5))))
    # Not a mix: only the spans that are no tool or model call, to show their cost alone.
    mixes.append(("no tool/model spans", plain_requests(runs)))
    for label, payloads in mixes:
        spans = sum(len(ExportTraceServiceRequest.FromString(p).resource_spans[0].scope_spans[0].spans) for p in payloads)
        fns = [pipeline, naive, decode_only, pipeline_python, decode_only_python]
        ours, base, floor, ours_py, floor_py = best_rates(fns, payloads, spans)
        out[label] = {"spans": spans, "decode": "native" if NATIVE_DECODE else "python",
                      "pipeline_spans_per_s": round(ours), "naive_spans_per_s": round(base),
                      "ratio_vs_naive": round(ours / base, 2),
                      "decode_only_spans_per_s": round(floor), "decode_only_ratio_vs_naive": round(floor / base, 2),
                      "python_decode_pipeline_ratio_vs_naive": round(ours_py / base, 2),
                      "python_decode_only_ratio_vs_naive": round(floor_py / base, 2)}
    return out


# -- 2. end to end over gRPC -----------------------------------------------------------
class _Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.finding_times: dict[bytes, float] = {}
        self.spans = 0

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
        now = time.monotonic()
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    self.spans += 1
                    if span.name.startswith("loopguard.finding ") and span.trace_id not in self.finding_times:
                        self.finding_times[span.trace_id] = now
        return trace_service_pb2.ExportTraceServiceResponse()


def _sender(port: int, payloads: list[bytes], queue: Any) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 * 2**20)])
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    sent: list[float] = []
    t0 = time.monotonic()
    for data in payloads:
        sent.append(time.monotonic())
        export(data, timeout=30)
    queue.put((t0, time.monotonic(), sent))


@contextlib.contextmanager
def serve_collections() -> Iterator[None]:
    """The cyclic collector as `serve` runs it (receiver/ops/pauses.py: full passes only when no
    request is in hand), not CPython's own, which walks this whole process (the sink, the
    payloads) while a request waits; the bench's own again afterwards."""
    threshold = gc.get_threshold()
    pauses.take_over()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def end_to_end(runs: int, serve_gc: bool = True) -> dict[str, Any]:
    """`serve_gc` False: the collector left to CPython, as in a receiver embedded in a program."""
    with serve_collections() if serve_gc else contextlib.nullcontext():
        return _end_to_end(runs)


def _end_to_end(runs: int) -> dict[str, Any]:
    from otel_loopguard.receiver.serve.server import start

    sink = _Sink()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)
    sink_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    os.environ.setdefault("OTEL_LOOPGUARD_KEY", KEY.decode())
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    config = ReceiverConfig(listen="127.0.0.1:0", forward=f"127.0.0.1:{sink_port}")
    running = asyncio.run_coroutine_threadsafe(start(config), loop).result(30)
    # One request per run, so "the request completing the evidence" is well defined.
    payloads = []
    for n in range(runs):
        ss = ScopeSpans(spans=agent_trace(n, 8, tagged=True, looping=n % 5 == 0))
        payloads.append(ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ss])]).SerializeToString())
    spans = sum(8 * 4 + 1 for _ in range(runs))
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    # Throughput: 512-span requests, as a BatchSpanProcessor or a Collector sends them.
    batched = requests_for(runs, tagged=True, first=100_000)
    proc = ctx.Process(target=_sender, args=(running.port, batched, queue))
    proc.start()
    b0, b1, _ = queue.get(timeout=600)
    proc.join(30)
    # Latency: one request per run, so "the request completing the evidence" is well defined.
    proc = ctx.Process(target=_sender, args=(running.port, payloads, queue))
    proc.start()
    t0, t1, sent = queue.get(timeout=600)
    proc.join(30)
    time.sleep(0.5)
    # Clocks: both processes use time.monotonic() (CLOCK_MONOTONIC, shared on Linux).
    latencies = sorted(
        sink.finding_times[(n + 1).to_bytes(16, "big")] - sent[n]
        for n in range(runs)
        if n % 5 == 0 and (n + 1).to_bytes(16, "big") in sink.finding_times
    )
    asyncio.run_coroutine_threadsafe(running.stop(grace=2), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    server.stop(0)

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 2) if latencies else float("nan")

    return {"spans": spans, "spans_per_s": round(spans / (b1 - b0)), "small_request_spans_per_s": round(spans / (t1 - t0)),
            "loops": runs // 5,
            "findings_seen": len(latencies), "latency_ms_p50": pct(0.50), "latency_ms_p99": pct(0.99)}


# -- 2b. the ceiling: the recorded spans over gRPC, raw bytes vs parse vs the receiver ------
_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


class _RawSink:
    """A downstream that takes the bytes and parses nothing (its cost is in every row alike)."""

    def __init__(self) -> None:
        self.requests = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                                  options=[("grpc.max_receive_message_length", 64 * 2**20)])
        handler = grpc.unary_unary_rpc_method_handler(self._export)
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, {"Export": handler}),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _export(self, data: bytes, context: Any) -> bytes:
        self.requests += 1
        return b""


async def _forwarder(sink_port: int, parse: bool) -> tuple[Any, int]:
    """A gRPC Export server forwarding each request to the sink: the raw bytes (`parse` False:
    the transport's ceiling), or parsed, every attribute read, and re-serialised (the naive
    Python passthrough)."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{sink_port}", options=[("grpc.max_send_message_length", 64 * 2**20)])
    send = channel.unary_unary(_EXPORT)

    async def export(data: bytes, context: Any) -> bytes:
        if parse:
            request = ExportTraceServiceRequest.FromString(data)
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        attributes(span.attributes)
            data = request.SerializeToString()
        await send(data, timeout=30)
        return b""

    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 * 2**20)])
    handler = grpc.unary_unary_rpc_method_handler(export)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, {"Export": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def ceiling(copies: int, rounds: int = 3) -> dict[str, Any]:
    """The recorded spans sent by another process, one request at a time, through each server
    in turn (best of `rounds`): spans/s on the wall clock and per CPU-second of this process
    (the server and a sink that parses nothing; the sender is elsewhere)."""
    from otel_loopguard.receiver.serve.server import start

    payloads = recorded_requests(copies)
    spans = sum(len(ExportTraceServiceRequest.FromString(p).resource_spans[0].scope_spans[0].spans) for p in payloads)
    logging.getLogger("otel_loopguard").setLevel(logging.ERROR)  # a finding per seven spans: no log lines
    sink = _RawSink()
    os.environ.setdefault("OTEL_LOOPGUARD_KEY", KEY.decode())
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)

    async def receiver() -> tuple[Any, int]:
        running = await start(ReceiverConfig(listen="127.0.0.1:0", forward=f"127.0.0.1:{sink.port}"))
        return running, running.port

    rows: dict[str, Any] = {}
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    for _ in range(rounds):
        for label, make, python in (("raw-bytes forwarder", lambda: _forwarder(sink.port, False), False),
                                    ("naive Python passthrough", lambda: _forwarder(sink.port, True), False),
                                    ("receiver, native decode", receiver, False),
                                    ("receiver, Python decode", receiver, True)):
            if label == "receiver, native decode" and not NATIVE_DECODE:
                continue
            server, port = run(make())
            with python_decode() if python else contextlib.nullcontext():
                gc.collect()
                cpu0 = time.process_time()
                proc = ctx.Process(target=_sender, args=(port, payloads, queue))
                proc.start()
                t0, t1, _ = queue.get(timeout=900)
                cpu = time.process_time() - cpu0
                proc.join(30)
            run(server.stop(grace=2) if hasattr(server, "port") else server.stop(2))
            best = rows.setdefault(label, {"spans_per_s": 0, "spans_per_cpu_s": 0})
            best["spans_per_s"] = max(best["spans_per_s"], round(spans / (t1 - t0)))
            best["spans_per_cpu_s"] = max(best["spans_per_cpu_s"], round(spans / cpu))
    loop.call_soon_threadsafe(loop.stop)
    sink.server.stop(0)
    raw = rows["raw-bytes forwarder"]
    for row in rows.values():
        row["wall_ratio_vs_raw"] = round(row["spans_per_s"] / raw["spans_per_s"], 3)
        row["cpu_ratio_vs_raw"] = round(row["spans_per_cpu_s"] / raw["spans_per_cpu_s"], 3)
    return {"spans": spans, "requests": len(payloads), "rows": rows}


# -- 3. memory per held call -----------------------------------------------------------
def memory_per_held_call(calls: int = 10_000) -> dict[str, Any]:
    spans = agent_trace(0, calls, tagged=False, looping=False)
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString()
    decoded = decode(request).spans
    config = ReceiverConfig(forward="127.0.0.1:1")
    fp = Fingerprinter(load_key(key=KEY), Policy())
    assembler = RunAssembler(fp, config, Metrics())
    tools = [d for d in decoded if d.call is not None]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    assembler.accept(tools)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    held = assembler.buffered_calls
    # The fingerprint memo is per process and bounded (fingerprint/fingerprinter.py), not
    # per held call: measured on its own and left out of the per-call figure.
    memo = _memo_bytes(fp)
    return {"held_calls": held, "bytes_per_held_call": round((grown - memo) / held), "fingerprint_memo_bytes": memo}


def _memo_bytes(fp: Fingerprinter) -> int:
    """What the memo added while traced: its dicts, key tuples and value tuples (not the
    payload texts, decoded before tracing began, nor the digests the held calls share)."""
    total = 0
    for memo in (fp._actions, fp._results):  # noqa: SLF001
        total += sys.getsizeof(memo)
        for key, value in memo.items():
            total += sys.getsizeof(key) + sys.getsizeof(value)
    # The equivalence memo's dict and keys; its values are the records the held calls point to
    # (counted per held call).
    equivalences = fp._equivalences  # noqa: SLF001
    total += sys.getsizeof(equivalences) + sum(sys.getsizeof(key) for key in equivalences)
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--ceiling-only", action="store_true", help="only the over-gRPC comparison on recorded spans")
    parser.add_argument("--copies", type=int, default=60, help="copies of the recorded traces for the ceiling")
    parser.add_argument("--pipeline-only", choices=sorted(MIXES), help="run only the in-process pipeline on this mix, "
                        "--repeat times after one warm-up, and print nothing (for instruction counts: callgrind)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if args.pipeline_only:
        logging.getLogger("otel_loopguard").setLevel(logging.ERROR)  # the findings' log lines
        payloads = MIXES[args.pipeline_only](args.runs)
        for _ in range(1 + args.repeat):
            pipeline(payloads)
        return
    if args.ceiling_only:
        print(json.dumps(ceiling(args.copies), indent=2))
        return
    result = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "throughput": throughput(args.runs),
        "end_to_end": end_to_end(args.runs),
        "ceiling": ceiling(args.copies),
        "memory": memory_per_held_call(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"python {result['python']}, {result['cpus']} cpus")
    for label, r in result["throughput"].items():
        print(f"pipeline ({label:19}): {r['pipeline_spans_per_s']:>9,} spans/s   naive passthrough {r['naive_spans_per_s']:>9,} spans/s   "
              f"ratio {r['ratio_vs_naive']}x   (decode alone {r['decode_only_ratio_vs_naive']}x; {r['decode']} decode; "
              f"Python decode: {r['python_decode_pipeline_ratio_vs_naive']}x, alone "
              f"{r['python_decode_only_ratio_vs_naive']}x; {r['spans']} spans)")
    e = result["end_to_end"]
    print(f"end to end over gRPC, inline to a sink: {e['spans_per_s']:,} spans/s in 512-span requests, "
          f"{e['small_request_spans_per_s']:,} spans/s in one-run (33-span) requests")
    print(f"finding latency (request completing a loop's evidence -> finding span at the sink): "
          f"p50 {e['latency_ms_p50']} ms, p99 {e['latency_ms_p99']} ms ({e['findings_seen']}/{e['loops']} loops)")
    c = result["ceiling"]
    for label, row in c["rows"].items():
        print(f"over gRPC, recorded spans ({label:24}): {row['spans_per_s']:>7,} spans/s ({row['wall_ratio_vs_raw']}x raw), "
              f"{row['spans_per_cpu_s']:>7,} spans per CPU-second ({row['cpu_ratio_vs_raw']}x raw)")
    m = result["memory"]
    print(f"memory: {m['bytes_per_held_call']} bytes per held untagged call ({m['held_calls']} held), "
          f"plus {m['fingerprint_memo_bytes']:,} bytes of fingerprint memo per process (bounded)")


if __name__ == "__main__":
    main()
