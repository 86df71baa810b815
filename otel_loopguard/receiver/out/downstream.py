"""Sending OTLP bytes downstream: retries with backoff, never a silent drop.

Forwarded requests retry within the caller's deadline; if that runs out the
caller answers UNAVAILABLE so its sender retries. Finding spans wait in a
bounded queue (finding_queue.py) and are retried until delivered or the
receiver shuts down.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ..config import ConfigError, ReceiverConfig
from ..ops.metrics import Metrics

_log = logging.getLogger("otel_loopguard.receiver")

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.DATA_LOSS,
    }
)


def retryable(err: grpc.aio.AioRpcError) -> bool:
    """OTLP's rule: RESOURCE_EXHAUSTED is retryable only when the server sent RetryInfo
    (a message over the size limit never will be accepted)."""
    if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
        trailers = err.trailing_metadata() or ()
        return any(key == "google.rpc.retryinfo-bin" for key, _ in trailers)
    return err.code() in RETRYABLE
SENT, RETRY_LATER, REJECTED = "sent", "retry_later", "rejected"
# Downstream refusals that are about the data, not about the downstream itself.
DATA_FAULTS = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED})


@dataclass(frozen=True)
class SendResult:
    status: str
    code: Optional[grpc.StatusCode] = None
    detail: str = ""
    rejected_spans: int = 0  # the downstream's partial success: accepted, but not all of it


class Downstream:
    def __init__(
        self,
        target: str,
        metrics: Metrics,
        *,
        max_message_bytes: int,
        credentials: Optional[grpc.ChannelCredentials] = None,
        headers: tuple[tuple[str, str], ...] = (),
        compression: str = "none",
    ):
        """`credentials` None means plaintext; `headers` go with every export (never logged)."""
        options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", 16 * 1024 * 1024),
            # Back to a returning downstream within a second or two: gRPC's default reconnect
            # backoff grows to 120 s, and took 10-14 s to notice a backend back after an outage.
            ("grpc.initial_reconnect_backoff_ms", 250),
            ("grpc.min_reconnect_backoff_ms", 250),
            ("grpc.max_reconnect_backoff_ms", 2000),
            # A connection that died silently (a NAT or load balancer dropping it) is noticed.
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.keepalive_timeout_ms", 10_000),
        ]
        self.target = target
        self._metrics = metrics
        self._metadata = headers or None
        gzip = grpc.Compression.Gzip if compression == "gzip" else grpc.Compression.NoCompression
        self._channel = (
            grpc.aio.secure_channel(target, credentials, options=options, compression=gzip)
            if credentials is not None
            else grpc.aio.insecure_channel(target, options=options, compression=gzip)
        )
        self._export = self._channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=None,  # we send bytes we already have
            response_deserializer=ExportTraceServiceResponse.FromString,
        )

    async def send(self, payload: bytes, timeout: float) -> SendResult:
        """SENT, RETRY_LATER (still failing at the deadline) or REJECTED (not retryable)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.05
        while True:
            remaining = deadline - loop.time()
            try:
                response = await self._export(payload, timeout=max(remaining, 0.01), metadata=self._metadata)
                partial = response.partial_success
                return SendResult(SENT, detail=partial.error_message, rejected_spans=max(partial.rejected_spans, 0))
            except grpc.aio.AioRpcError as err:
                self._metrics.inc("export_failures_total")
                if not retryable(err):
                    _log.error("downstream %s refused: %s %s", self.target, err.code().name, err.details())
                    return SendResult(REJECTED, err.code(), err.details() or "")
                if loop.time() + delay >= deadline:
                    # The details say why (refused connection, TLS name mismatch ...): keep them.
                    _log.warning("downstream %s unavailable: %s %s", self.target, err.code().name, err.details() or "")
                    return SendResult(RETRY_LATER, err.code(), err.details() or "")
            except Exception as exc:  # grpc refusing the call locally (e.g. metadata) is no RPC error
                self._metrics.inc("export_failures_total")
                _log.error("cannot send to downstream %s: %s", self.target, type(exc).__name__)
                return SendResult(REJECTED, None, f"the call could not be made ({type(exc).__name__})")
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, 2.0)

    async def close(self) -> None:
        await self._channel.close()


def channel_credentials(config: ReceiverConfig) -> Optional[grpc.ChannelCredentials]:
    """TLS credentials for the downstream from the config's PEM files; None for plaintext."""
    if not config.tls:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_pem(config.certificate_file, "certificate_file"),
        private_key=_pem(config.client_key_file, "client_key_file"),
        certificate_chain=_pem(config.client_certificate_file, "client_certificate_file"),
    )


def _pem(path: Optional[str], setting: str) -> Optional[bytes]:
    if not path:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot read {path}: {exc.strerror}") from None
    if b"-----BEGIN" not in data:  # contents are never echoed: this may be a private key
        raise ConfigError(f"{setting}: {path} is not a PEM file")
    return data


async def take_batch(queue: "asyncio.Queue[Any]", limit: int) -> list[Any]:
    """The next item (waiting for one), then as many more as are ready, up to `limit`."""
    batch = [await queue.get()]
    while len(batch) < limit and not queue.empty():
        batch.append(queue.get_nowait())
    return batch


async def cancel(task: Optional["asyncio.Task[Any]"]) -> None:
    """Stop a worker task and wait until it has."""
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
