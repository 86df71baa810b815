"""One tool span per `tools/call`, in the MCP and GenAI conventions (conventions/mcp.py).

The span starts when the client's request passes and ends with the server's answer (or the
proxy's own, or the reason none came). Its parent is the client's trace context when the
request carries one in `params._meta`; the run is the session (`mcp.session.id`, which the
proxy's processor is told to read as the run id).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode

from ..conventions import mcp as conv

_OPERATION = "gen_ai.operation.name"


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class CallSpans:
    def __init__(self, tracer: trace.Tracer, session_id: str, transport: str = "pipe"):
        self._tracer = tracer
        self.session_id = session_id
        self._transport = transport  # network.transport: pipe for stdio, tcp for HTTP
        self.protocol: Optional[str] = None  # the version the client asked for at initialize

    def start(self, request_id: Any, tool: str, arguments: Any, meta: Any) -> trace.Span:
        attributes = {
            conv.METHOD: conv.TOOLS_CALL, _OPERATION: "execute_tool", conv.TOOL: tool,
            conv.REQUEST_ID: str(request_id), conv.SESSION_ID: self.session_id, "network.transport": self._transport,
            conv.ARGUMENTS[0]: _text(arguments if arguments is not None else {}),
        }
        if self.protocol:
            attributes[conv.PROTOCOL_VERSION] = self.protocol
        parent = propagate.extract(meta) if isinstance(meta, dict) else None
        return self._tracer.start_span(f"{conv.TOOLS_CALL} {tool}", context=parent, kind=SpanKind.CLIENT,
                                       attributes=attributes)

    @staticmethod
    def result(span: trace.Span, result: Any) -> None:
        """The server's result: `_meta` left out (trace context, progress tokens: not the tool's)."""
        shown = {k: v for k, v in result.items() if k != "_meta"} if isinstance(result, dict) else result
        span.set_attribute(conv.RESULT[0], _text(shown))
        if isinstance(result, dict) and result.get("isError") is True:
            span.set_attribute("error.type", "tool_error")
            span.set_status(StatusCode.ERROR)
        span.end()

    @staticmethod
    def error(span: trace.Span, error: Any) -> None:
        """A JSON-RPC error answer: its code is the error type, its message the status."""
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        span.set_attributes({"error.type": str(code), "rpc.response.status_code": str(code)})
        span.set_status(StatusCode.ERROR, str(message) if message is not None else None)
        span.end()

    @staticmethod
    def lost(span: trace.Span, why: str) -> None:
        """No answer will come (cancelled, the server exited, the client left)."""
        span.set_attribute("error.type", why)
        span.set_status(StatusCode.ERROR, why)
        span.end()
