"""The pipes: the client on this process's stdin/stdout, the server as a child process.

Two pumps run until one side ends. The server's end (it exited or closed its stdout): every
call still open gets an error answer, the client's stdout is closed, the proxy exits with the
server's status. The client's end (its stdin closed, or SIGTERM): the server's stdin is
closed, as the MCP spec's shutdown asks, the server is given `grace` seconds to finish (its
last answers still pass), then terminated, then killed. A write to a side that has gone is
dropped; the other side goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any, BinaryIO, Optional

from .framing import MAX_LINE, LineSplitter
from .session import TO_SERVER, Session

_log = logging.getLogger("otel_loopguard.mcp")
READ = 64 * 1024
GRACE_SECONDS = 2.0


class _Out:
    """A stream writer that stops writing, quietly, once its reader has gone."""

    def __init__(self, writer: asyncio.StreamWriter, name: str):
        self._writer, self._name, self.gone = writer, name, False

    async def write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, OSError, RuntimeError) as exc:  # RuntimeError: transport closed
            self.gone = True
            _log.warning("otel-loopguard mcp-proxy: the %s stopped reading (%s); its messages are dropped",
                         self._name, type(exc).__name__)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()


async def _client_pipes(stdin: BinaryIO, stdout: BinaryIO) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def _client_to_server(reader: asyncio.StreamReader, session: Session, server: _Out, client: _Out) -> None:
    splitter = LineSplitter()
    while chunk := await reader.read(READ):
        for piece in splitter.feed(chunk):
            where, data = session.from_client(piece)
            await (server if where == TO_SERVER else client).write(data)
    for piece in splitter.rest():
        where, data = session.from_client(piece)
        await (server if where == TO_SERVER else client).write(data)


async def _server_to_client(reader: asyncio.StreamReader, session: Session, client: _Out) -> None:
    splitter = LineSplitter()
    while chunk := await reader.read(READ):
        for piece in splitter.feed(chunk):
            await client.write(session.from_server(piece))
    for piece in splitter.rest():
        await client.write(session.from_server(piece))


async def run(command: list[str], session: Session, stdin: Optional[BinaryIO] = None,
              stdout: Optional[BinaryIO] = None, grace: float = GRACE_SECONDS) -> int:
    """Proxy one session until either side ends; the server's exit status (128 + signal)."""
    try:
        proc = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, limit=MAX_LINE)
    except OSError as exc:
        _log.error("otel-loopguard mcp-proxy: cannot start the MCP server %r: %s", command[0], exc)
        return 127
    assert proc.stdin is not None and proc.stdout is not None
    reader, writer = await _client_pipes(stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)
    client, server = _Out(writer, "client"), _Out(proc.stdin, "MCP server")
    stop = asyncio.Event()
    _on_signals(stop)
    pumps: dict[asyncio.Task[Any], str] = {asyncio.create_task(_client_to_server(reader, session, server, client)): "client",
             asyncio.create_task(_server_to_client(proc.stdout, session, client)): "server"}
    stopping = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*pumps, stopping], return_when=asyncio.FIRST_COMPLETED)
    ended = next((pumps[t] for t in done if t in pumps), "client")
    if ended == "server":
        return await _server_ended(proc, session, pumps, client, stopping)
    return await _client_ended(proc, session, pumps, server, client, stopping, grace)


async def _server_ended(proc: asyncio.subprocess.Process, session: Session, pumps: dict[asyncio.Task[Any], str], client: _Out,
                        stopping: asyncio.Task) -> int:
    for answer in session.close("server_exit"):
        await client.write(answer)
    client.close()
    code = await proc.wait()
    _cancel([*pumps, stopping])
    _log.log(logging.WARNING if code else logging.INFO, "otel-loopguard mcp-proxy: the MCP server exited (%s)", code)
    return _status(code)


async def _client_ended(proc: asyncio.subprocess.Process, session: Session, pumps: dict[asyncio.Task[Any], str], server: _Out, client: _Out,
                        stopping: asyncio.Task, grace: float) -> int:
    server.close()  # the server's stdin: the MCP shutdown sequence starts with it
    to_client = next(t for t, side in pumps.items() if side == "server")
    code = await _wait_exit(proc, to_client, grace)
    session.close("client_disconnected")
    client.close()
    _cancel([*pumps, stopping])
    return _status(code)


async def _wait_exit(proc: asyncio.subprocess.Process, output: asyncio.Task, grace: float) -> int:
    """The server's answers still pass while it winds down; then terminate, then kill."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(output), grace)
    for stop in (None, proc.terminate, proc.kill):
        if stop is not None:
            with contextlib.suppress(ProcessLookupError):
                stop()
        try:
            return await asyncio.wait_for(proc.wait(), grace)
        except asyncio.TimeoutError:
            continue
    return await proc.wait()


def _on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)


def _cancel(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()


def _status(code: int) -> int:
    return 128 - code if code < 0 else code
