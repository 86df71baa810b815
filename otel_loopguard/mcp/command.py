"""`otel-loopguard mcp-proxy [--mode M] [--policy FILE] -- <server command ...>`.

Tracing is set up as an application would: a TracerProvider (service name from
OTEL_SERVICE_NAME, else `otel-loopguard-mcp-proxy`), a batch processor and the OTLP exporter
the standard OTEL_EXPORTER_OTLP_* settings configure (gRPC, or HTTP when
OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL says http/protobuf; OTEL_TRACES_EXPORTER=none: none),
then install() with the session id as the run id. The guard reads the same settings as
otel_loopguard.guard() (mode, policy, key, the kill switch). Nothing but the server's
messages is written to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import uuid
from typing import Optional

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from ..conventions import mcp as conv
from ..enforce import make_guard
from ..processor.install import install
from ..version import __version__
from . import proxy
from .session import Session
from .spans import CallSpans

_log = logging.getLogger("otel_loopguard.mcp")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=("observe", "enforce"), default=None,
                        help="enforce: answer a looping tools/call with a tool error; observe: record would_block "
                             "(default: OTEL_LOOPGUARD_MODE, else enforce)")
    parser.add_argument("--policy", default=None, help="policy file (default: OTEL_LOOPGUARD_POLICY)")
    parser.add_argument("--session-id", default=None, help="the run id of this session (default: a new one)")
    parser.add_argument("--listen", default=None, metavar="HOST:PORT",
                        help="streamable HTTP: serve here, before the MCP endpoint --upstream (needs the mcp extra)")
    parser.add_argument("--upstream", default=None, metavar="URL", help="streamable HTTP: the MCP server's endpoint")
    parser.add_argument("server", nargs=argparse.REMAINDER, help="-- then the MCP server's own command (stdio)")


def run(args: argparse.Namespace) -> int:
    command = args.server[1:] if args.server[:1] == ["--"] else args.server
    http = args.listen is not None or args.upstream is not None
    if http and (command or not (args.listen and args.upstream)):
        _log.error("mcp-proxy: streamable HTTP takes --listen HOST:PORT and --upstream URL, and no server command")
        return 2
    if not http and not command:
        _log.error("mcp-proxy: no server command: otel-loopguard mcp-proxy -- <server command ...>")
        return 2
    provider = _provider()
    try:
        install(tracer_provider=provider, run_id_attribute=conv.SESSION_ID, mode=args.mode, policy=args.policy)
        guard = make_guard(mode=args.mode, policy=args.policy)
        tracer = provider.get_tracer("otel-loopguard.mcp-proxy", __version__)
        if http:
            from . import http as http_transport

            return asyncio.run(http_transport.serve(args.listen, args.upstream,
                                                    lambda sid: Session(CallSpans(tracer, sid, "tcp"), guard)))
        spans = CallSpans(tracer, args.session_id or uuid.uuid4().hex)
        return asyncio.run(proxy.run(command, Session(spans, guard)))
    finally:
        provider.shutdown()  # flushes the last spans


def _provider() -> TracerProvider:
    service = os.environ.get("OTEL_SERVICE_NAME") or "otel-loopguard-mcp-proxy"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = _exporter()
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter() -> Optional[SpanExporter]:
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return None
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if (protocol or "grpc").strip().lower().startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
        return HttpExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()
