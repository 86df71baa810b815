"""`otel-loopguard demo`: scripted agents, traced with one added line, judged live.

Everything runs in this process on loopback, with no API key and no network:
scripted agents -> OTLP exporter -> `otel-loopguard serve --forward` -> a small
in-process OTLP endpoint standing in for your tracing backend. The findings
are the spans that backend receives.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import secrets
import sys
import threading
import time
from concurrent import futures
from typing import Any, Callable, Iterator, Optional, TextIO

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

from .otlp.values import attributes

Step = tuple[str, dict[str, Any], Any, bool]  # tool, arguments, result, ok


class Backend(trace_service_pb2_grpc.TraceServiceServicer):
    """Stands in for a tracing backend: keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
        with self._lock:
            self.spans += [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        return trace_service_pb2.ExportTraceServiceResponse()

    def named(self, name: str) -> list[Any]:
        """Spans named `name`, bare or followed by detail (`loopguard.finding stop repeat lookup_order`)."""
        with self._lock:
            return [s for s in self.spans if s.name.split(" ", 1)[0] == name]


def _agents() -> dict[str, list[Step]]:
    order = ("lookup_order", {"order_id": "A12"}, {"status": "delivered", "version": 7}, True)
    pages = [
        ("search_cases", {"query": "refund", "cursor": c}, {"items": [{"id": i}], "next": n}, True)
        for c, i, n in ((None, 1, "p2"), ("p2", 2, "p3"), ("p3", 3, None))
    ]
    ping = ("read_file", {"path": "plan.md"}, "draft v1", True)
    pong = ("write_file", {"path": "plan.md", "text": "draft v1"}, {"changed": False}, True)
    parse = [("parse_invoice", {"file": f"inv-{i}.pdf"}, "error: unreadable PDF", False) for i in range(5)]
    return {
        "support agent stuck on one order": [order] * 7,
        "search agent paging through results": pages,
        "planner ping-ponging between two tools": [ping, pong] * 4,
        "extractor failing on every file": parse,
    }


def _run_agent(tracer: Any, name: str, steps: list[Step]) -> str:
    with tracer.start_as_current_span(f"invoke_agent {name}") as root:
        for turn, (tool, args, result, ok) in enumerate(steps, start=1):
            with tracer.start_as_current_span("chat scripted-model") as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
                chat.set_attribute("gen_ai.usage.input_tokens", 900 + 150 * turn)
                chat.set_attribute("gen_ai.usage.output_tokens", 40)
            marked = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=marked) as span:
                span.set_attribute("gen_ai.tool.call.id", f"call_{turn}")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
                if not ok:
                    span.set_status(Status(StatusCode.ERROR, "tool failed"))
        return format(root.get_span_context().trace_id, "032x")


def run(out: TextIO = sys.stdout) -> int:
    # One random key for this demo, shared by the app and the receiver through the
    # environment of this process; it is never printed or written anywhere.
    os.environ.setdefault("OTEL_LOOPGUARD_KEY", "hex:" + secrets.token_hex(32))
    # The receiver logs each finding; the table below shows them, so keep the screen clear.
    logging.getLogger("otel_loopguard.receiver").setLevel(logging.ERROR)
    backend = Backend()
    receiver, loop = _start_receiver(backend.port)
    say = _printer(out)
    say(f"receiver listening on 127.0.0.1:{receiver.port}, forwarding to a stand-in backend on :{backend.port}")
    provider = TracerProvider(resource=Resource.create({"service.name": "scripted-agents"}))
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{receiver.port}", insecure=True)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))

    import otel_loopguard

    otel_loopguard.install(tracer_provider=provider)  # the one line an application adds
    tracer = provider.get_tracer("demo")
    traces: dict[str, str] = {}
    for name, steps in _agents().items():
        traces[_run_agent(tracer, name, steps)] = name
        say(f"ran {name!r}: {len(steps)} tool calls")
    provider.force_flush()
    say("waiting for the receiver to judge the runs ...")
    _wait(lambda: len({attributes(s.attributes).get("loopguard.run.id") for s in backend.named("loopguard.run")}) >= len(traces), 20)
    _report(backend, traces, out)
    provider.shutdown()
    asyncio.run_coroutine_threadsafe(receiver.stop(grace=2), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    backend.server.stop(0)
    return 0


def _start_receiver(backend_port: int) -> tuple[Any, asyncio.AbstractEventLoop]:
    from .receiver.config import ReceiverConfig
    from .receiver.serve.server import start

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True, name="loopguard-demo").start()
    config = ReceiverConfig(listen="127.0.0.1:0", forward=f"127.0.0.1:{backend_port}", root_grace_seconds=0.5)
    return asyncio.run_coroutine_threadsafe(start(config), loop).result(30), loop


def _printer(out: TextIO) -> Callable[[str], None]:
    t0 = time.monotonic()
    return lambda text: print(f"[{time.monotonic() - t0:5.1f}s] {text}", file=out, flush=True)


def _wait(done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.1)


def _report(backend: Backend, traces: dict[str, str], out: TextIO) -> None:
    print("\nFindings, as your tracing backend received them (new spans in each agent's trace):\n", file=out)
    print(f"  {'agent':<42} {'severity':<8} {'kind':<18} {'calls':<7} reason", file=out)
    for trace_id, name in traces.items():
        rows: list[Optional[dict[str, Any]]] = list(_findings(backend, trace_id))
        for f in rows or [None]:
            if f is None:
                print(f"  {name:<42} {'-':<8} {'none':<18} {'':<7} no loop", file=out)
                continue
            calls = f"{f['loopguard.finding.first_seq']}-{f['loopguard.finding.last_seq']}"
            print(f"  {name:<42} {f['loopguard.finding.severity']:<8} {f['loopguard.finding.kind']:<18} "
                  f"{calls:<7} {f['loopguard.finding.reason']}", file=out)
    print("\nEach finding span links to the offending tool spans (loopguard.finding.span_ids) and sits\n"
          "in the agent's own trace. Point `otel-loopguard serve --forward` at your backend to see them\n"
          "there; docs/deployment.md shows how they look in Phoenix, Jaeger and Tempo.", file=out)
    if _phoenix_installed():
        print("\nPhoenix is installed: `phoenix serve` (UI on http://localhost:6006, OTLP/gRPC on :4317), then\n"
              "`otel-loopguard serve --listen 127.0.0.1:4327 --forward 127.0.0.1:4317`, and run your app with\n"
              "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4327 to browse the findings there (README,\n"
              "\"Use it in your app\").", file=out)


def _phoenix_installed() -> bool:
    """Without importing it (that is slow): is the Phoenix server on this machine?"""
    spec = importlib.util.find_spec("phoenix")
    locations = spec.submodule_search_locations if spec else None
    return any(os.path.exists(os.path.join(p, "server", "main.py")) for p in locations or ())


def _findings(backend: Backend, trace_id: str) -> Iterator[dict[str, Any]]:
    for span in backend.named("loopguard.finding"):
        if span.trace_id.hex() == trace_id:
            attrs = attributes(span.attributes)
            if attrs.get("loopguard.finding.severity") in ("warn", "stop"):
                yield attrs
