"""One MCP session's decisions, without I/O: each line in gives the lines out, and where.

Every line goes on unchanged, except a `tools/call` the guard denies in enforce mode: the
proxy answers it itself with an MCP tool error and the server never sees it. Order for a
call: the request starts its span and asks the guard (`check`); the server's answer ends the
span and feeds the guard (`record`); a cancellation, the server's exit or the client's
departure ends it with that reason. A batch (a JSON array) passes whole and is traced, never
enforced: answering part of it would need the batch rewritten.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Optional

from opentelemetry import trace

from ..conventions import mcp as conv
from ..enforce.decorator import record_decision
from ..enforce.guard import Decision, Guard
from . import messages
from .framing import Piece, parse
from .spans import CallSpans

_log = logging.getLogger("otel_loopguard.mcp")
MAX_PENDING = 4096  # calls awaiting an answer; past it the oldest is ended as lost
TO_SERVER, TO_CLIENT = "server", "client"


@dataclass
class _Pending:
    span: trace.Span
    decision: Optional[Decision]  # what the guard's record() needs once the answer comes


class Session:
    def __init__(self, spans: CallSpans, guard: Optional[Guard]):
        self._spans = spans
        self._guard = guard
        self._pending: dict[str, _Pending] = {}
        self._warned: set[str] = set()

    @property
    def run_id(self) -> str:
        return self._spans.session_id

    def from_client(self, piece: Piece) -> tuple[str, bytes]:
        """Where this line of the client's goes: to the server, or answered back (denied)."""
        message = parse(piece.data) if piece.whole else None
        if piece.whole and message is None and piece.data.strip():
            self._warn("client", "a line from the client is not JSON: passed on to the server, which answers it")
        if isinstance(message, list):
            for item in message:
                self._client_message(item, enforce=False)
        elif isinstance(message, dict):
            answer = self._client_message(message, enforce=True)
            if answer is not None:
                return TO_CLIENT, answer
        return TO_SERVER, piece.data

    def from_server(self, piece: Piece) -> bytes:
        message = parse(piece.data) if piece.whole else None
        if piece.whole and message is None and piece.data.strip():
            self._warn("server", "a line from the server is not JSON: passed on to the client")
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict) and "method" not in item and ("result" in item or "error" in item):
                self._answered(item)
        return piece.data

    def close(self, why: str) -> list[bytes]:
        """The session ends (`why`: server_exit, client_disconnected): every call still open
        is ended; the client gets an error answer for each (it may still be reading)."""
        out = []
        for key, pending in list(self._pending.items()):
            del self._pending[key]
            CallSpans.lost(pending.span, why)
            out.append(messages.rpc_error(json.loads(key), messages.SERVER_GONE,
                                          f"otel-loopguard mcp-proxy: the MCP server is gone ({why}) before answering"))
        return out

    def _client_message(self, message: dict[str, Any], *, enforce: bool) -> Optional[bytes]:
        method = message.get("method")
        raw = message.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if method == conv.TOOLS_CALL and "id" in message:
            return self._call(message["id"], params, enforce)
        if method == "notifications/cancelled":
            self._cancelled(params.get("requestId"))
        elif method == "initialize" and isinstance(params.get("protocolVersion"), str):
            self._spans.protocol = params["protocolVersion"]
        return None

    def _call(self, request_id: Any, params: dict[str, Any], enforce: bool) -> Optional[bytes]:
        name = params.get("name")
        tool = name if isinstance(name, str) else "unknown"
        arguments = params.get("arguments")
        span = self._spans.start(request_id, tool, arguments, params.get("_meta"))
        decision = None
        if self._guard is not None:
            decision = self._guard.check(tool, arguments, run_id=self.run_id)
            record_decision(decision, tool, span)
            if decision.denied and enforce:
                span.end()
                return messages.tool_error(request_id, messages.denial_text(decision.message, tool, arguments))
        self._remember(_key(request_id), _Pending(span=span, decision=decision))
        return None

    def _remember(self, key: str, pending: _Pending) -> None:
        if len(self._pending) >= MAX_PENDING:
            oldest = next(iter(self._pending))
            CallSpans.lost(self._pending.pop(oldest).span, "no_answer")
        old = self._pending.pop(key, None)
        if old is not None:  # the client reused an id still open: the first gets no answer
            CallSpans.lost(old.span, "no_answer")
        self._pending[key] = pending

    def _answered(self, message: dict[str, Any]) -> None:
        pending = self._pending.pop(_key(message.get("id")), None)
        if pending is None:
            return
        if "error" in message:
            CallSpans.error(pending.span, message["error"])
            ok, result = False, message["error"]
        else:
            result = message["result"]
            CallSpans.result(pending.span, result)
            ok = not (isinstance(result, dict) and result.get("isError") is True)
        if self._guard is not None and pending.decision is not None:
            self._guard.record(pending.decision, result, ok, run_id=self.run_id)

    def _cancelled(self, request_id: Any) -> None:
        pending = self._pending.pop(_key(request_id), None)
        if pending is not None:
            CallSpans.lost(pending.span, "cancelled")

    def _warn(self, side: str, text: str) -> None:
        if side not in self._warned:  # once per side: a broken peer could send a flood
            self._warned.add(side)
            _log.warning("otel-loopguard mcp-proxy: %s", text)


def _key(request_id: Any) -> str:
    """JSON-RPC ids are strings or numbers, and 1 is not "1": the id's JSON text tells them apart."""
    return json.dumps(request_id)
