"""Streamable HTTP: the proxy as a reverse proxy before one MCP endpoint, many sessions at once.

Each request goes upstream with its method, body and headers unchanged (less hop-by-hop headers;
`accept-encoding: identity`, so the answer can be read); the answer comes back unchanged, streamed
as it arrives (SSE events pass one by one). The run is the client's `Mcp-Session-Id`; a request
without one (initialize, a stateless server) is traced in a run of its own and never enforced.
A `tools/call` POST the guard denies in enforce mode is answered here (HTTP 200, JSON) and never
sent upstream. A DELETE that the server accepts ends the session. Needs the `mcp` extra
(uvicorn, httpx2).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Callable, Optional

from .framing import MAX_LINE, Piece
from .session import TO_CLIENT, Session

_log = logging.getLogger("otel_loopguard.mcp")
SESSION_HEADER = b"mcp-session-id"
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                        b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length", b"accept-encoding"})
MAX_SESSIONS = 10_000  # past it the oldest session is ended (its open calls as lost)


class SseReader:
    """The `data` of each server-sent event, as the bytes arrive (bounded like a stdio line)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buf += chunk.replace(b"\r\n", b"\n")
        out = []
        while (end := self._buf.find(b"\n\n")) >= 0:
            event = bytes(self._buf[:end])
            del self._buf[: end + 2]
            data = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                out.append(b"\n".join(data))
        if len(self._buf) > MAX_LINE:
            self._buf.clear()  # an event too long to read: it still passes, untraced
        return out


class HttpProxy:
    """An ASGI application forwarding every request to `upstream`."""

    def __init__(self, upstream: str, make_session: Callable[[str], Session], client: Any):
        self._upstream = upstream.rstrip("/")
        self._make = make_session
        self._client = client
        self._sessions: dict[str, Session] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        body = await _body(receive)
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP] + [(b"accept-encoding", b"identity")]
        sid = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == SESSION_HEADER), None)
        post = scope["method"] == "POST"
        # Without a session id (initialize, a stateless server) a request is a run of its own.
        session = self._session(sid) if sid else self._make(uuid.uuid4().hex) if post else None
        if post and session is not None:
            where, data = session.from_client(Piece(body, whole=len(body) <= MAX_LINE))
            if where == TO_CLIENT and sid is not None:
                await _answer(send, data, sid)
                return
        await self._forward(scope, headers, body, session, send)
        if scope["method"] == "DELETE" and sid is not None:
            gone = self._sessions.pop(sid, None)
            if gone is not None:
                gone.close("client_disconnected")

    def _session(self, sid: str) -> Session:
        session = self._sessions.get(sid)
        if session is None:
            if len(self._sessions) >= MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions))).close("no_answer")
            session = self._sessions[sid] = self._make(sid)
        return session

    async def _forward(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]], body: bytes,
                       session: Optional[Session], send: Any) -> None:
        query = scope.get("query_string") or b""
        url = self._upstream + (("?" + query.decode("latin-1")) if query else "")
        request = self._client.build_request(scope["method"], url, headers=headers, content=body)
        try:
            response = await self._client.send(request, stream=True)
        except Exception as exc:  # the server is down: the client gets a clear 502, the proxy goes on
            _log.warning("otel-loopguard mcp-proxy: the MCP server at %s did not answer: %s", self._upstream, exc)
            await _plain(send, 502, f"otel-loopguard mcp-proxy: the MCP server did not answer ({type(exc).__name__})")
            return
        try:
            await self._relay(response, session, send)
        finally:
            await response.aclose()

    async def _relay(self, response: Any, session: Optional[Session], send: Any) -> None:
        out = [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP]
        await send({"type": "http.response.start", "status": response.status_code, "headers": out})
        kind = response.headers.get("content-type", "")
        sse, whole = SseReader(), bytearray()
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if session is None:
                continue
            if kind.startswith("text/event-stream"):
                for data in sse.feed(chunk):
                    session.from_server(Piece(data, whole=True))
            elif len(whole) <= MAX_LINE:
                whole += chunk
        if session is not None and kind.startswith("application/json") and 0 < len(whole) <= MAX_LINE:
            session.from_server(Piece(bytes(whole), whole=True))
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _answer(send: Any, data: bytes, sid: str) -> None:
    headers = [(b"content-type", b"application/json"), (SESSION_HEADER, sid.encode("latin-1"))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def _plain(send: Any, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": text.encode()})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def serve(listen: str, upstream: str, make_session: Callable[[str], Session]) -> int:
    """Serve until SIGTERM or SIGINT; 0."""
    import httpx2
    import uvicorn

    host, _, port = listen.rpartition(":")
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(None, connect=10.0)) as client:
        config = uvicorn.Config(HttpProxy(upstream, make_session, client), host=host or "127.0.0.1", port=int(port),
                                log_level="warning", lifespan="on")
        await uvicorn.Server(config).serve()
    return 0
