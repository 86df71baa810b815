"""The Export method of a receiver with a state directory, from its first moment on the port.

Until the state directory is this process's (a predecessor still hands it over, or what it left
is still being read) every request is written to the inbox (state/handover.py) and answered at
once: the sender never waits on a restart. Then the inboxes are replayed through the service in
order (orphans of dead processes first, then this one's) and, once nothing is left in them,
requests go to the service directly. A request the service refuses for good at replay
(malformed, too large) is logged: its sender was answered already.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from pathlib import Path
from typing import Any, Optional

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ..state.handover import Inbox
from ..state.spool import Ref, Spool
from .service import SERVICE, TraceReceiver, retry_trailers

_log = logging.getLogger("otel_loopguard.receiver")
RETRY_SECONDS = 0.2  # a replayed request the service asked to retry (memory bound, full queue)
INBOX_BYTES = 256 * 1024 * 1024  # taken in while not replayed yet; past it senders retry later


class _Refused(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code


class _Replay:
    """What the service's export() reads of a gRPC context, for a request replayed from disk."""

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> None:
        raise _Refused(code, details)

    def cancelled(self) -> bool:
        return False

    def done(self) -> bool:
        return False


class Front:
    """Inbox first, the service once the inboxes are replayed (see the module docstring)."""

    def __init__(self, inbox: Inbox):
        self._inbox = inbox
        self._waiting: deque[tuple[Ref, bytes]] = deque()
        self._bytes = 0
        self.receiver: Optional[TraceReceiver] = None  # serving directly once set
        self.taken_in = 0

    def handler(self) -> grpc.GenericRpcHandler:
        export = grpc.unary_unary_rpc_method_handler(
            self.export, request_deserializer=None, response_serializer=ExportTraceServiceResponse.SerializeToString)
        return grpc.method_handlers_generic_handler(SERVICE, {"Export": export})

    async def export(self, data: bytes, context: grpc.aio.ServicerContext) -> ExportTraceServiceResponse:
        if self.receiver is not None:
            return await self.receiver.export(data, context)
        if self._bytes and self._bytes + len(data) > INBOX_BYTES:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "otel-loopguard is taking over from its predecessor; "
                                "retry shortly", trailing_metadata=retry_trailers(1.0, "taking over"))
        ref = self._inbox.spool.append(data, 0, b"")  # on disk (the OS) before the answer, as the queue
        self._waiting.append((ref, data))
        self._bytes += len(data)
        self.taken_in += 1
        return ExportTraceServiceResponse()

    async def replay(self, receiver: TraceReceiver, orphans: list[Path]) -> int:
        """Feed `receiver` the orphaned inboxes, then this one's, in order; then serve directly."""
        done = 0
        for path in orphans:
            spool = Spool(path)
            for record in spool.recover():
                await _feed(receiver, record.payload)
                spool.ack(record.ref)
                done += 1
            spool.close()
            _remove(path)
        while self._waiting:  # requests keep coming meanwhile: they queue up behind
            ref, data = self._waiting[0]
            await _feed(receiver, data)
            self._inbox.spool.ack(ref)
            self._waiting.popleft()
            self._bytes -= len(data)
            done += 1
        self.receiver = receiver  # in the same turn of the event loop as the check above: nothing slips between
        return done


async def _feed(receiver: TraceReceiver, data: bytes) -> None:
    while True:
        try:
            await receiver.export(data, _Replay())  # type: ignore[arg-type]
            return
        except _Refused as refused:
            if refused.code != grpc.StatusCode.UNAVAILABLE:
                _log.warning("a request taken in while taking over is refused now (%s: %s); its sender was "
                             "answered already, its spans are dropped", refused.code.name, refused)
                return
        await asyncio.sleep(RETRY_SECONDS)


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
