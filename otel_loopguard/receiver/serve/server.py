"""`otel-loopguard serve`: wire the receiver together and run it until a signal.

Shutdown is graceful: stop taking requests, complete every open run, deliver
the queued findings (bounded wait), then close the downstream channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ... import local_receivers
from ...canon import load_key
from ...fingerprint import Fingerprinter
from ...policy import load_policy
from ..ops import pauses, trim
from ..runs.assembly import RunAssembler
from ..ops.budget import MIB, MemoryBudget, dedupe_entries, forward_queue_bytes, working_bytes
from ..config import ReceiverConfig, is_loopback, parse_headers, split_host_port
from ..ingest.dedupe import SpanDeduper
from ..out.delivery import ForwardQueue, queue_for
from ..out.downstream import Downstream, channel_credentials
from ..out.finding_queue import FindingQueue
from ..ops.metrics import Metrics, serve_metrics
from ..out.phoenix import PhoenixAnnotator
from .reload import Reloader
from ..runs.restart import RestartRule
from ..runs.buffer import RunBuffer
from ..ops.security import BearerAuth, CertificateStore, Tokens, load_certificates, load_tokens
from ..state import snapshot
from ..state.judged import CompletedRuns, JudgedLog
from .service import SERVICE, TraceReceiver, parse_request
from ..ops.pauses import FullCollections
from ..state.spool import Recovered, Ref
from ..state.directory import Opened, open_state

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
    state: Optional[Opened] = None  # the state directory (state_dir), when there is one

    def reload(self) -> None:
        """What SIGHUP does: policy, certificates and tokens, each checked before it is used."""
        if self.reloader is not None:
            self.reloader.reload()

    async def stop(self, grace: float = 5.0) -> None:
        await self._health.enter_graceful_shutdown()
        await self.server.stop(grace)
        if self.state is not None:  # no span is taken from here on: the next process's boundary
            self.state.state.beat()
        await self.receiver.settle(grace)
        for task in self._tasks:
            task.cancel()
        if self.forward_queue is not None:  # the spans senders were told are taken, before their findings
            await self.forward_queue.drain(timeout=grace)
        saving = self.assembler.release_for_snapshot() if self.state is not None else []
        cut = [b.run_id for b in self.assembler.runs.values() if b.root_ended_at is None and b.tool_calls_seen]
        self.findings.put(self.assembler.flush(shutdown=True))
        if self.state is not None:
            self._save_open_runs(self.state, saving, cut)
        if self.receiver.judged is not None:  # every open run is saved or judged now
            self.receiver.judged.all_judged()
            self.receiver.judged.close()
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
        if self.state is not None:
            self.state.close()
        local_receivers.withdraw(self.note)
        _log.info("otel-loopguard receiver stopped")


    def _save_open_runs(self, state: Opened, runs: list[RunBuffer], cut: list[str]) -> None:
        """Open runs go to the state directory unjudged, for the next process to go on with, with
        the late cache and the runs judged as cut; if they cannot be written they are judged
        here, as cut (restart.py)."""
        now = time.monotonic()
        try:
            saved = snapshot.save(state.state.path, runs, self.assembler.fingerprinter, now, state.dense_seq,
                                  self.assembler.late_cache(now), cut)
            _log.info("shutdown: %d open runs saved to the state directory for the next start", saved)
        except OSError as exc:
            _log.error("shutdown: cannot save the open runs to %s (%s): they are judged now, as cut",
                       state.state.path, exc.strerror or exc)
            for buffer in runs:
                self.assembler.adopt(buffer, [])
            self.findings.put(self.assembler.flush(shutdown=True))


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
    # The memory bound sets the caps it is made of (budget.py), for the in-memory and on-disk
    # state alike: the effective settings, resolved once.
    limit = working_bytes(config.memory_limit_mib)
    config = replace(config, dedupe_size=dedupe_entries(limit, config.dedupe_size),
                     forward_queue_bytes=forward_queue_bytes(limit, config.forward_queue_bytes))
    state = open_state(config) if config.state_dir else None
    forward_queue, findings = _queues(config, downstream, metrics, state)
    assembler = RunAssembler(Fingerprinter(key, policy), config, metrics)
    deduper = state.deduper if state is not None else SpanDeduper(config.dedupe_size, config.dedupe_seconds)
    budget = MemoryBudget(limit_bytes=limit, max_open_runs=config.max_open_runs,
                          max_buffered_calls=config.max_buffered_calls, deduper=deduper, assembler=assembler,
                          findings=findings, queue=forward_queue)
    receiver = TraceReceiver(config, assembler, deduper, downstream, findings, metrics, forward_queue, budget)
    if state is not None:
        _restore(config, state, assembler, receiver)
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
        if state is not None:
            state.close()
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
        if state is not None:
            state.close()
        raise OSError(f"cannot listen on {config.listen} ({problem or 'in use, or not an address of this host'})")
    await server.start()
    for name in ("", SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    findings.start()
    if forward_queue is not None:
        forward_queue.start()
    annotator = _annotator(config, metrics, findings)
    ticker = asyncio.create_task(_tick(assembler, findings, metrics, state, receiver.judged,
                                       _Memory(deduper, budget, receiver, assembler)), name="loopguard-tick")
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
                   tasks, metrics_server, health_servicer, reloader, forward_queue, annotator, note, state)


def _queues(config: ReceiverConfig, downstream: Downstream, metrics: Metrics,
            state: Optional[Opened]) -> tuple[Optional[ForwardQueue], FindingQueue]:
    """The forward queue (inline mode) and the finding queue, on disk with a state directory,
    holding first what the previous process left undelivered."""
    forward_queue = queue_for(None if config.findings_only else downstream, metrics, config.forward_queue_bytes,
                              config.forward_consumers, config.forward_timeout_seconds,
                              state.spool if state is not None else None)
    findings = FindingQueue(downstream, metrics, timeout=config.forward_timeout_seconds, after=forward_queue,
                            spool=state.findings if state is not None else None)
    if state is not None:
        if forward_queue is not None:
            forward_queue.requeue(state.recovered)
        findings.requeue(state.findings_recovered)
    return forward_queue, findings


def _restore(config: ReceiverConfig, state: Opened, assembler: RunAssembler, receiver: TraceReceiver) -> None:
    """What the previous process left in the state directory: the open runs of a clean shutdown
    (snapshot.py) and its late cache, or the requests a crash left unjudged (judged.py); then
    the rule for runs it may have cut (restart.py), which spares the runs rebuilt here."""
    assembler.journal_runs = True
    state.dense_seq = config.dense_seq
    header = snapshot.load(state.state.path, assembler.fingerprinter, time.monotonic(), assembler.adopt)
    if header is not None:
        assembler.restore_late_cache(header.late_runs, header.late_traces, time.monotonic())
    done: dict[str, Ref] = {}
    if state.spool is not None:
        completed = CompletedRuns(state.state.path / "completed-runs")
        done = completed.load()
        receiver.judged = JudgedLog(state.spool, completed=completed)
        assembler.on_complete = receiver.judged.completed
        _judge_again(config, assembler, receiver.judged, state.recovered, done)
    # Known exactly what the previous process had (a snapshot, or a queue that keeps requests
    # until judged): only its runs judged or cut are marked when they go on here. Otherwise
    # span start times decide (restart.py).
    known = set(done) | set(header.cut if header is not None else ())
    assembler.restart = RestartRule(state.state.previous_alive_ns, time.monotonic(), config.restart_window_seconds,
                                    clean=header is not None or state.spool is not None, known_cut=frozenset(known))


def _judge_again(config: ReceiverConfig, assembler: RunAssembler, judged: JudgedLog, recovered: list[Recovered],
                 done: dict[str, Ref]) -> None:
    """Requests a crash left unjudged, fed to the detectors again in their order (judged.py),
    without the spans of runs completed before the crash (`done`). Their findings were queued
    (on disk) before the crash: the replay's are not sent again."""
    again = [r for r in recovered if not r.judged]
    for r in again:
        spans = [d for d in parse_request(r.payload, config.run_id_attribute).spans
                 if d.run_id is None or not _before(r.ref, done.get(d.run_id))]
        assembler.accept(spans)
        judged.fed(r.ref, {d.run_id for d in spans if d.run_id in assembler.runs})
    for buffer in assembler.runs.values():
        buffer.restored = True  # whole again: not runs that began before this process (restart.py)
    if again:
        _log.info("state dir: %d accepted requests of %d runs still open at the crash fed to the detectors again",
                  len(again), len(assembler.runs))


def _before(ref: Ref, upto: Optional[Ref]) -> bool:
    return upto is not None and (ref.segment, ref.offset) <= (upto.segment, upto.offset)


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
    assembler: RunAssembler

    def __post_init__(self) -> None:
        self.trimmer = trim.Trimmer(max(16 * MIB, self.budget.limit // 16))
        self.collections = FullCollections(lambda: self.receiver.quiet_for() >= pauses.QUIET_SECONDS)

    async def tick(self, metrics: Metrics) -> None:
        self.deduper.expire()
        self.receiver.shed_runs()
        estimate = self.budget.usage().total
        metrics.set_gauge("memory_estimate_bytes", estimate)
        metrics.set_gauge("dedupe_entries", len(self.deduper))
        metrics.set_gauge("dedupe_evictions_total", self.deduper.evictions)
        collected = self.collections.tick()
        due = self.trimmer.due(estimate)
        if due == trim.SETTLED:  # the burst is over: what it cached goes too, its cycles when quiet
            trim.forget_caches(self.assembler.fingerprinter)
            self.collections.request()
        if (due or collected) and trim.available():
            await asyncio.to_thread(trim.release_free_memory)  # ctypes lets go of the GIL meanwhile
            if due == trim.SETTLED:
                self.assembler.repack(trim.copied)
                await asyncio.to_thread(trim.release_free_memory)


async def _tick(assembler: RunAssembler, findings: FindingQueue, metrics: Metrics, state: Optional[Opened],
                judged: Optional[JudgedLog], memory: _Memory) -> None:
    while True:
        await asyncio.sleep(TICK_SECONDS)
        try:
            if state is not None:
                state.state.beat()
            findings.put(assembler.tick())
            if judged is not None:  # after the findings are queued (on disk): their requests are done
                judged.settle()
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
    # A dedicated process: full collections only when no sender waits on them. Before start():
    # what it restores from a state directory (open runs) must stay collectable, not frozen.
    pauses.take_over()
    started.append(await start(config))
    await stop.wait()
    _log.info("shutting down: completing open runs and flushing findings")
    await started[0].stop()
