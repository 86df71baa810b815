"""The receiver's two ports: the OTLP/gRPC server (with its health service and bearer-token
check) and the Prometheus endpoint, each bound before startup goes on; and what startup says
about who may reach them."""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from ..config import ReceiverConfig, is_loopback, split_host_port
from ..ops.metrics import Metrics, serve_metrics
from ..ops.security import BearerAuth, CertificateStore, Tokens

_log = logging.getLogger("otel_loopguard.receiver")


def grpc_server(config: ReceiverConfig, handler: grpc.GenericRpcHandler, metrics: Metrics,
                tokens: Optional[Tokens]) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
    """The gRPC server, its handlers added, not yet bound."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", config.max_receive_bytes),
            ("grpc.max_send_message_length", 16 * 1024 * 1024),
            # gRPC shares a port by default (SO_REUSEPORT): a second receiver on it would quietly
            # take part of the traffic, with its own dedupe and runs. Without a state directory a
            # port in use is an error. With one, the port is shared so that a successor can
            # listen beside this receiver before it stops (state/handover.py); a receiver checks
            # that the port is free, or held by the owner of its state directory, before binding.
            ("grpc.so_reuseport", 1 if config.state_dir else 0),
        ]
    )
    # Checked once per request, before the handler: spans of a refused request are never decoded.
    server.add_generic_rpc_handlers((BearerAuth(handler, tokens, metrics) if tokens is not None else handler,))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    return server, health_servicer


def bind(server: grpc.aio.Server, listen: str, certificates: Optional[CertificateStore],
         checked: bool = True) -> tuple[int, Optional[str]]:
    """The port bound (0: none) and, when known, why `listen` could not be. `checked`: a port in
    use is refused (False: a successor binding beside the owner of its state directory)."""
    problem = cannot_bind(listen) if checked else None
    try:
        # Tried first by us: gRPC's C core logs its own "Failed to add port" line before ours.
        port = 0 if problem else (server.add_secure_port(listen, certificates.credentials())
                                  if certificates is not None else server.add_insecure_port(listen))
    except RuntimeError:  # grpcio raises this where older releases returned 0
        port = 0
    return port, problem


def cannot_bind(listen: str) -> Optional[str]:
    """Why `listen` cannot be bound, tried as gRPC binds it (address reuse on, port sharing
    off); None when it can be, or when only gRPC can tell (a name that does not resolve)."""
    import errno
    import socket

    host, port = split_host_port(listen)
    if port == 0:
        return None
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return "the port is in use: another process listens there"
                return f"not an address of this host: {exc.strerror}"
    return None


async def metrics_endpoint(metrics: Metrics, listen: Optional[str], certificates: Optional[CertificateStore],
                           tokens: Optional[Tokens]) -> tuple[Optional[asyncio.base_events.Server], Optional[int]]:
    """The Prometheus endpoint, with the listen side's TLS and tokens when it has them."""
    if not listen:
        return None, None
    host, port = split_host_port(listen)
    context = certificates.ssl_context() if certificates is not None else None
    server = await serve_metrics(metrics, host, port, context, tokens)
    bound = server.sockets[0].getsockname()[1]
    _log.info("metrics on %s://%s:%d/metrics", "https" if context else "http", f"[{host}]" if ":" in host else host,
              bound)
    return server, bound


def listen_side(config: ReceiverConfig, certificates: Optional[CertificateStore], tokens: Optional[Tokens]) -> str:
    tls = "plaintext" if certificates is None else "mutual TLS" if config.tls_client_ca_file else "TLS"
    return f"{tls}, {f'{len(tokens)} bearer token(s)' if tokens is not None else 'no auth'}"  # a count only


def warn_if_open(config: ReceiverConfig, certificates: Optional[CertificateStore], tokens: Optional[Tokens]) -> None:
    """Allowed (a private network may be protection enough), but said out loud."""
    admits_anyone = tokens is None and not config.tls_client_ca_file
    for setting, listen in (("listen", config.listen), ("metrics_listen", config.metrics_listen)):
        if not listen or is_loopback(split_host_port(listen)[0]):
            continue
        if admits_anyone:
            _log.warning("%s %s is not loopback and asks for neither a token nor a client certificate: anyone who "
                         "reaches it can %s (docs/security.md)", setting, listen,
                         "send spans and forged findings" if setting == "listen" else "read the metrics")
        elif certificates is None:
            _log.warning("%s %s is not loopback and not TLS: bearer tokens cross the network in plaintext",
                         setting, listen)
