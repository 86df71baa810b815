"""The proxy's test bench: a real OTLP/gRPC sink, the proxy as a real process between the MCP
SDK's real client and a real server (server.py), and tee.py recording both sides' bytes."""

from __future__ import annotations

import os
import socket
import sys
import threading
from concurrent import futures
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Optional

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
KEY = "0123456789abcdef0123456789abcdef"


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass
class Span:
    name: str
    trace_id: str
    attributes: dict[str, Any]
    status_code: int
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    """Stores every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests: list[bytes] = []  # as received: OTLP protobuf files for the audit
        self._lock = threading.Lock()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"127.0.0.1:{self.port}")
        self._server.start()

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC's name)
        with self._lock:
            self.requests.append(request.SerializeToString())
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(Span(
                            name=s.name, trace_id=s.trace_id.hex(), status_code=s.status.code,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            events=[(e.name, {a.key: _value(a.value) for a in e.attributes}) for e in s.events]))
        return trace_service_pb2.ExportTraceServiceResponse()

    def tool_spans(self) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.attributes.get("mcp.method.name") == "tools/call"]

    def findings(self) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if "loopguard.finding.kind" in s.attributes]

    def stop(self) -> None:
        self._server.stop(0)


def proxy_command(tmp: Path, *, mode: str, server: Optional[list[str]] = None) -> list[str]:
    """The proxy, its server behind tee.py (tmp/server.in, .out); the proxy's own stderr in tmp/proxy.err."""
    server = server or [sys.executable, str(HERE / "server.py")]
    return [sys.executable, "-m", "otel_loopguard.cli", "mcp-proxy", "--mode", mode, "--",
            sys.executable, str(HERE / "tee.py"), str(tmp / "server"), "--", *server]


def env(sink: Sink, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                                                        "https_proxy"))}
    out.update({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.port}", "OTEL_EXPORTER_OTLP_INSECURE": "true",
                "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_LOOPGUARD_KEY": KEY, "PYTHONPATH": str(ROOT),
                "NO_PROXY": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1"})
    out.update(extra)
    return out


@asynccontextmanager
async def client(tmp: Path, command: list[str], environment: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's real client, talking to `command` through tee.py (tmp/client.in, .out)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(HERE / "tee.py"), str(tmp / "client"), "--",
                                                                 *command], env=environment, cwd=str(ROOT))
    with open(tmp / "proxy.err", "w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


class RawClient:
    """A hand-written client on the proxy's pipes: what the SDK never sends (batches, bad lines)."""

    def __init__(self, tmp: Path, environment: dict[str, str], mode: str = "observe",
                 server: Optional[list[str]] = None):
        import queue
        import subprocess

        server = server or [sys.executable, str(HERE / "raw_server.py")]
        self.err_path = tmp / "proxy.err"
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(proxy_command(tmp, mode=mode, server=server), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err, env=environment, cwd=str(ROOT))
        self._lines: "queue.Queue[bytes]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")  # end of stream

    def send(self, message: Any) -> None:
        import json

        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self, timeout: float = 20) -> bytes:
        return self._lines.get(timeout=timeout)

    def read_json(self, timeout: float = 20) -> Any:
        import json

        return json.loads(self.read(timeout))

    def close_input(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float = 30) -> int:
        code = self.proc.wait(timeout=timeout)
        self._err.close()
        return code

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        assert self.read_json()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def call(request_id: Any, name: str, arguments: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}
