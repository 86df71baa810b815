"""An agent application for the Collector tests, run as its own process.

It sets tracing up the way the README tells users to: `otel_loopguard.install()` and nothing
else, so the SDK's default OTLP/gRPC exporter (BatchSpanProcessor, OTEL_EXPORTER_OTLP_* from
the environment) sends its spans. Then it runs scripted agents at a steady pace: every other
run loops (the same lookup six times, same result), the others look up something new each
time. It writes what it created to --out when it has flushed: every span id per trace, and
which traces loop, so a test can count what reached the backend.

  python app.py --out FILE [--runs N] [--rate RUNS_PER_SECOND] [--conversations] [--no-processor]

--conversations: each run is a conversation of two traces (calls 1-3, then 4-6) tied by
`gen_ai.conversation.id` on every span, as an agent that starts a trace per user turn does.
--no-processor: the plain SDK (TracerProvider, BatchSpanProcessor, OTLP exporter) without
otel_loopguard: untagged spans, judged by the receiver alone.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

import otel_loopguard

CALLS = 6


class Ledger(SpanProcessor):
    """Every span the app ended, by trace: what the backend must receive exactly once."""

    def __init__(self) -> None:
        self.spans: dict[str, list[str]] = defaultdict(list)

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        self.spans[format(ctx.trace_id, "032x")].append(format(ctx.span_id, "016x"))


def _call(i: int, looping: bool, run: int) -> tuple[dict[str, Any], dict[str, Any]]:
    if looping:
        return {"order_id": f"A{run}"}, {"status": "delivered", "version": 7}
    return {"order_id": f"A{run}-{i}"}, {"status": "delivered", "order_id": f"A{run}-{i}", "version": i}


def _turns(tracer: Any, run: int, looping: bool, calls: range, attrs: dict[str, str]) -> str:
    with tracer.start_as_current_span("invoke_agent support", attributes=attrs) as root:
        for i in calls:
            with tracer.start_as_current_span("chat scripted-model", attributes=attrs) as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
                chat.set_attribute("gen_ai.usage.input_tokens", 900 + 150 * i)
                chat.set_attribute("gen_ai.usage.output_tokens", 40)
            args, result = _call(i, looping, run)
            tool_attrs = {**attrs, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"}
            with tracer.start_as_current_span("execute_tool lookup_order", attributes=tool_attrs) as span:
                span.set_attribute("gen_ai.tool.call.id", f"call_{run}_{i}")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
        return format(root.get_span_context().trace_id, "032x")


def _plain_sdk() -> Any:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rate", type=float, default=20.0, help="runs started per second")
    parser.add_argument("--conversations", action="store_true")
    parser.add_argument("--no-processor", action="store_true")
    args = parser.parse_args()

    provider = (_plain_sdk() if args.no_processor else otel_loopguard.install(
        run_id_attribute="gen_ai.conversation.id" if args.conversations else None).provider)
    ledger = Ledger()
    provider.add_span_processor(ledger)
    tracer = trace.get_tracer("collector-test-app")
    loops, healthy, conversations = [], [], {}
    start = time.monotonic()
    for run in range(args.runs):
        time.sleep(max(0.0, start + run / args.rate - time.monotonic()))
        looping = run % 2 == 0
        if args.conversations:
            conv = f"conv-{run}"
            traces = [_turns(tracer, run, looping, range(1, 4), {"gen_ai.conversation.id": conv}),
                      _turns(tracer, run, looping, range(4, CALLS + 1), {"gen_ai.conversation.id": conv})]
            conversations[conv] = traces
            (loops if looping else healthy).append(conv)
        else:
            (loops if looping else healthy).append(_turns(tracer, run, looping, range(1, CALLS + 1), {}))
    flushed = provider.force_flush(60_000)
    provider.shutdown()
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump({"spans": ledger.spans, "loops": loops, "healthy": healthy, "conversations": conversations,
                   "flushed": flushed, "seconds": time.monotonic() - start}, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
