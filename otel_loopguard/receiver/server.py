"""`otel-loopguard serve`: wire the receiver together and run it until a signal.

Shutdown is graceful: stop taking requests, complete every open run, deliver
the queued findings (bounded wait), then close the downstream channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from .. import local_receivers
from ..fingerprint import Fingerprinter, load_key
from ..policy import load_policy
from . import trim
from .assembly import RunAssembler
from .budget import MIB, MemoryBudget, dedupe_entries, forward_queue_bytes, working_bytes
from .config import ReceiverConfig, is_loopback, parse_headers, split_host_port
from .dedupe import SpanDeduper
from .delivery import ForwardQueue, queue_for
from .downstream import Downstream, FindingQueue, channel_credentials
from .metrics import Metrics, serve_metrics
from .phoenix import PhoenixAnnotator
from .reload import Reloader
from .security import BearerAuth, CertificateStore, Tokens, load_certificates, load_tokens
from .service import SERVICE, TraceReceiver

_log = logging.getLogger("otel_loopguard.receiver")
TICK_SECONDS = 0.25


@dataclass
class Running:
    """A started receiver: what tests and the CLI need to reach and stop it."""

    server: grpc.aio.Server
    port: int
    receiver: TraceReceiver
    metrics: Metrics
    assembler: RunAssembler
    findings: FindingQueue
    downstream: Downstream
    metrics_port: Optional[int]
    _tasks: list[asyncio.Task[None]]
    _metrics_server: Optional[asyncio.base_events.Server]
    _health: health.aio.HealthServicer
    reloader: Optional[Reloader] = None
    forward_queue: Optional[ForwardQueue] = None  # inline mode, answering once queued
    annotator: Optional[PhoenixAnnotator] = None
    note: Optional[Path] = None  # where this receiver told local apps where it forwards

    def reload(self) -> None:
        """What SIGHUP does: policy, certificates and tokens, each checked before it is used."""
        if self.reloader is not None:
            self.reloader.reload()

    async def stop(self, grace: float = 5.0) -> None:
        await self._health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.receiver.settle(grace)
        for task in self._tasks:
            task.cancel()
        if self.forward_queue is not None:  # the spans senders were told are taken, before their findings
            await self.forward_queue.drain(timeout=grace)
        self.findings.put(self.assembler.flush())
        await self.findings.drain(timeout=grace)
        await self.findings.stop()
        if self.annotator is not None:
            await self.annotator.drain(timeout=grace)
            await self.annotator.stop()
        if self.forward_queue is not None:
            await self.forward_queue.stop()
        if self._metrics_server is not None:
            self._metrics_server.close()
        await self.downstream.close()
        local_receivers.withdraw(self.note)
        _log.info("otel-loopguard receiver stopped")


async def start(config: ReceiverConfig) -> Running:
    policy = load_policy(config.policy)
    key = load_key(key_file=config.key_file) if config.key_file else load_key()
    # Read and checked before anything is bound: a bad file stops startup with its setting's name.
    loaded = load_certificates(config)
    certificates = CertificateStore(loaded) if loaded is not None else None
    tokens = Tokens(load_tokens(config)) if config.auth_token_file or config.auth_tokens else None
    metrics = Metrics()
    assert config.forward is not None  # validate() guarantees a downstream
    downstream = Downstream(config.forward, metrics, config.max_receive_bytes, channel_credentials(config),
                            parse_headers(config.headers), config.compression)
    limit = working_bytes(config.memory_limit_mib)
    forward_queue = queue_for(None if config.findings_only else downstream, metrics,
                              forward_queue_bytes(limit, config.forward_queue_bytes), config.forward_consumers,
                              config.forward_timeout_seconds)
    findings = FindingQueue(downstream, metrics, timeout=config.forward_timeout_seconds, after=forward_queue)
    assembler = RunAssembler(Fingerprinter(key, policy), config, metrics)
    deduper = SpanDeduper(dedupe_entries(limit, config.dedupe_size), config.dedupe_seconds)
    budget = MemoryBudget(limit, config.max_open_runs, config.max_buffered_calls, deduper, assembler, findings,
                          forward_queue)
    receiver = TraceReceiver(config, assembler, deduper, downstream, findings, metrics, forward_queue, budget)

    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", config.max_receive_bytes),
            ("grpc.max_send_message_length", 16 * 1024 * 1024),
            # gRPC shares a port by default: a second receiver on it would quietly take part of
            # the traffic, with its own dedupe and runs. A port in use is an error instead.
            ("grpc.so_reuseport", 0),
        ]
    )
    handler = receiver.handler()
    # Checked once per request, before the handler: spans of a refused request are never decoded.
    server.add_generic_rpc_handlers((BearerAuth(handler, tokens, metrics) if tokens is not None else handler,))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:  # bound first: a bad metrics address leaves no gRPC port bound behind it
        metrics_server, metrics_port = await _metrics(metrics, config.metrics_listen, certificates, tokens)
    except OSError as exc:
        await downstream.close()
        raise OSError(f"cannot serve metrics on {config.metrics_listen}: {exc.strerror or exc}") from None
    problem = _cannot_bind(config.listen)
    try:
        # Tried first by us: gRPC's C core logs its own "Failed to add port" line before ours.
        port = 0 if problem else (server.add_secure_port(config.listen, certificates.credentials())
                                  if certificates is not None else server.add_insecure_port(config.listen))
    except RuntimeError:  # grpcio raises this where older releases returned 0
        port = 0
    if port == 0:
        if metrics_server is not None:
            metrics_server.close()
        await downstream.close()
        raise OSError(f"cannot listen on {config.listen} ({problem or 'in use, or not an address of this host'})")
    await server.start()
    for name in ("", SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    findings.start()
    if forward_queue is not None:
        forward_queue.start()
    annotator = _annotator(config, metrics, findings)
    ticker = asyncio.create_task(_tick(assembler, findings, metrics, _Memory(deduper, budget, receiver)),
                                 name="loopguard-tick")
    tasks = [ticker]
    reloader = Reloader(config, key, assembler, metrics, certificates, tokens)
    if reloader.watching and config.reload_poll_seconds > 0:
        tasks.append(asyncio.create_task(reloader.watch(config.reload_poll_seconds), name="loopguard-reload"))
    mode = "findings-only" if config.findings_only else "inline"
    names = ",".join(k for k, _ in parse_headers(config.headers)) or "none"  # names only: values may be keys
    if config.headers and not config.tls:
        _log.warning("headers (%s) are sent in plaintext to %s; set certificate_file or insecure: false for TLS",
                     names, config.forward)
    host = config.listen.rpartition(":")[0]
    listen_side = _listen_side(config, certificates, tokens)
    _log.info("otel-loopguard receiver on %s:%d over %s (%s mode, downstream %s over %s, headers %s, compression %s, "
              "key id %s, policy %s)", host, port, listen_side, mode, config.forward,
              "TLS" if config.tls else "plaintext", names, config.compression, key.key_id, policy.version)
    _warn_if_open(config, certificates, tokens)
    # install() in an app on this machine reads it: an exporter aimed at `forward` bypasses us.
    note = local_receivers.announce(f"{host}:{port}", config.forward)
    return Running(server, port, receiver, metrics, assembler, findings, downstream, metrics_port,
                   tasks, metrics_server, health_servicer, reloader, forward_queue, annotator, note)


def _annotator(config: ReceiverConfig, metrics: Metrics, findings: FindingQueue) -> Optional[PhoenixAnnotator]:
    """The opt-in Phoenix trace annotations, fed with the finding spans the downstream took."""
    if not config.annotate_phoenix_url:
        return None
    annotator = PhoenixAnnotator(config.annotate_phoenix_url, config.phoenix_api_key, metrics,
                                 timeout=config.forward_timeout_seconds)
    findings.on_delivered = annotator.offer
    annotator.start()
    _log.info("stop findings also go to Phoenix at %s as trace annotations named %r%s", config.annotate_phoenix_url,
              "loopguard", " (with an API key)" if config.phoenix_api_key else "")
    return annotator


def _cannot_bind(listen: str) -> Optional[str]:
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


def _listen_side(config: ReceiverConfig, certificates: Optional[CertificateStore], tokens: Optional[Tokens]) -> str:
    tls = "plaintext" if certificates is None else "mutual TLS" if config.tls_client_ca_file else "TLS"
    return f"{tls}, {f'{len(tokens)} bearer token(s)' if tokens is not None else 'no auth'}"  # a count only


def _warn_if_open(config: ReceiverConfig, certificates: Optional[CertificateStore], tokens: Optional[Tokens]) -> None:
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


async def _metrics(metrics: Metrics, listen: Optional[str], certificates: Optional[CertificateStore],
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


@dataclass
class _Memory:
    """What the timer does for the memory bound: expire dedupe entries, shed runs, trim the heap."""

    deduper: SpanDeduper
    budget: MemoryBudget
    receiver: TraceReceiver

    def __post_init__(self) -> None:
        self.trimmer = trim.Trimmer(max(16 * MIB, self.budget.limit // 16))

    async def tick(self, metrics: Metrics) -> None:
        self.deduper.expire()
        self.receiver.shed_runs()
        estimate = self.budget.usage().total
        metrics.set_gauge("memory_estimate_bytes", estimate)
        metrics.set_gauge("dedupe_entries", len(self.deduper))
        metrics.set_gauge("dedupe_evictions_total", self.deduper.evictions)
        if self.trimmer.due(estimate):
            await asyncio.to_thread(trim.release_free_memory)  # ctypes lets go of the GIL meanwhile


async def _tick(assembler: RunAssembler, findings: FindingQueue, metrics: Metrics, memory: _Memory) -> None:
    while True:
        await asyncio.sleep(TICK_SECONDS)
        try:
            findings.put(assembler.tick())
            metrics.set_gauge("buffered_calls", assembler.buffered_calls)
            metrics.set_gauge("runs_open", len(assembler.runs))
            await memory.tick(metrics)
        except Exception:  # a bug here must not stop the receiver; it is logged loudly
            _log.exception("run completion failed")


def _reload_all(started: list[Running]) -> None:
    for running in started:
        running.reload()


async def run_until_signal(config: ReceiverConfig) -> None:
    stop = asyncio.Event()
    started: list[Running] = []
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    # Before start(): SIGHUP's default action ends the process, and the port is open (health
    # SERVING) before start() returns. A SIGHUP that early has nothing to reload yet.
    with contextlib.suppress(NotImplementedError, AttributeError):  # no SIGHUP on Windows
        loop.add_signal_handler(signal.SIGHUP, _reload_all, started)
    started.append(await start(config))
    await stop.wait()
    _log.info("shutting down: completing open runs and flushing findings")
    await started[0].stop()
