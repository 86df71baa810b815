"""An agent app under steady load, for restarts (issue 27): many traces open at once.

Run as its own process. Tracing is set up as the README tells users (`otel_loopguard.install()`:
the SDK's default BatchSpanProcessor, queue 2048, batches of 512 every 5 s or when 512 are
waiting, and the default OTLP/gRPC exporter, 10 s timeout, retries from 1 s). It starts `--rate`
traces a second for `--seconds`; each makes `--calls` turns (a model call, then a tool call:
two spans), one every `--interval` seconds (so about rate x calls x interval traces are open at any time: 100 x 9 x 0.3 = 270; about 1,900 spans a second),
then ends its root span. Every other trace loops (the same lookup, the same result, each
time); the others look up something new each time. When it has flushed it writes to --out
every span id it ended, by trace, and which traces loop, so a test counts what reached the
backend (tests/collector/scenarios.py, `delivery`), and what the SDK said meanwhile (its queue
full, its exporter retrying or giving up).

  python load_app.py --out FILE [--rate 100] [--seconds 20] [--calls 9] [--interval 0.3]
"""

from __future__ import annotations

import argparse
import heapq
import json
import logging
import time
from collections import defaultdict
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

import otel_loopguard


class Ledger(SpanProcessor):
    """Every span the app ended, by trace: what the backend must receive exactly once."""

    def __init__(self) -> None:
        self.spans: dict[str, list[str]] = defaultdict(list)
        self.ended: dict[str, float] = {}  # span id -> when it ended (monotonic): when a full queue dropped it

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        self.spans[format(ctx.trace_id, "032x")].append(format(ctx.span_id, "016x"))
        self.ended[format(ctx.span_id, "016x")] = round(time.monotonic(), 3)


class Exporting(logging.Handler):
    """What the SDK says while exporting: "Queue full, dropping span" (logged once, not per span),
    the exporter's retries ("Transient error ... retrying") and batches it gave up on."""

    def __init__(self) -> None:
        super().__init__()
        self.queue_full = 0
        self.retries = 0
        self.failures = 0
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "Queue full" in text:
            self.queue_full += 1
        elif "Transient error" in text:
            self.retries += 1
        elif "Failed to export" in text:
            self.failures += 1
        else:
            return
        if len(self.messages) < 30:
            self.messages.append(f"{time.monotonic():.3f} {text[:300]}")


class Timed:
    """Each call of the OTLP exporter's export(): when it began (the system's monotonic clock, the
    one the test's timeline uses), how long it took and its result. A batch whose export blocks
    longer than the queue lasts makes the SDK drop spans with the port open: this shows it."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float, str]] = []

    def wrap(self, cls: Any) -> None:
        export = cls.export
        calls = self.calls

        def timed(exporter: Any, spans: Any, *args: Any, **kwargs: Any) -> Any:
            began = time.monotonic()
            result = export(exporter, spans, *args, **kwargs)
            calls.append((round(began, 3), round(time.monotonic() - began, 3), f"{len(spans)} {result.name}"))
            return result

        cls.export = timed


def _turn(tracer: Any, root: Any, run: int, i: int, looping: bool) -> None:
    """A model call, then the tool call it asked for (as app.py's agents do)."""
    ctx = trace.set_span_in_context(root)
    chat = tracer.start_span("chat scripted-model", context=ctx, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 900 + 150 * i,
        "gen_ai.usage.output_tokens": 40})
    chat.end()
    args = {"order_id": f"A{run}"} if looping else {"order_id": f"A{run}-{i}"}
    result = {"status": "delivered", "version": 7} if looping else {"status": "delivered", "version": i}
    span = tracer.start_span("execute_tool lookup_order", context=ctx, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
        "gen_ai.tool.call.id": f"call_{run}_{i}", "gen_ai.tool.call.arguments": json.dumps(args),
        "gen_ai.tool.call.result": json.dumps(result)})
    span.end()


def run(tracer: Any, rate: float, seconds: float, calls: int, interval: float) -> tuple[list[str], list[str]]:
    """Every trace's calls on one timeline (a heap of due times), run in order on this thread."""
    loops: list[str] = []
    healthy: list[str] = []
    roots: dict[int, Any] = {}
    start = time.monotonic()
    due: list[tuple[float, int, int]] = [(start + n / rate, n, 0) for n in range(int(rate * seconds))]
    heapq.heapify(due)
    while due:
        at, run_no, call = heapq.heappop(due)
        time.sleep(max(0.0, at - time.monotonic()))
        looping = run_no % 2 == 0
        if call == 0:
            root = roots[run_no] = tracer.start_span("invoke_agent support")
            trace_id = format(root.get_span_context().trace_id, "032x")
            (loops if looping else healthy).append(trace_id)
        if call < calls:
            _turn(tracer, roots[run_no], run_no, call + 1, looping)
            heapq.heappush(due, (at + interval, run_no, call + 1))
        else:
            roots.pop(run_no).end()
    return loops, healthy


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--rate", type=float, default=100.0, help="traces started per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="for how long traces are started")
    parser.add_argument("--calls", type=int, default=9, help="tool calls a trace")
    parser.add_argument("--interval", type=float, default=0.3, help="seconds between a trace's calls")
    args = parser.parse_args()

    said = Exporting()
    logging.getLogger("opentelemetry").addHandler(said)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    exports = Timed()
    exports.wrap(OTLPSpanExporter)  # before install(): the SDK builds its exporter from this class
    provider = otel_loopguard.install().provider
    ledger = Ledger()
    provider.add_span_processor(ledger)
    tracer = trace.get_tracer("restart-load-app")
    start = time.monotonic()
    loops, healthy = run(tracer, args.rate, args.seconds, args.calls, args.interval)
    flushed = provider.force_flush(60_000)
    provider.shutdown()
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump({"spans": ledger.spans, "loops": loops, "healthy": healthy, "conversations": {},
                   "flushed": flushed, "seconds": time.monotonic() - start, "sdk_queue_full": said.queue_full,
                   "exporter_retries": said.retries, "exporter_failures": said.failures, "sdk_said": said.messages, "ended": ledger.ended,
                   "exports": exports.calls}, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
