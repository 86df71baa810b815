"""`otel-loopguard serve`: build the receiver from its config and run it until a signal.

Each part is built complete, everything it needs passed in, bottom first: the settings the
files name (checked before anything is built), the pipeline that handles spans (queues, run
assembler restored from the state directory, dedupe, memory bound, service), the two ports,
then the workers. Running (running.py) stops it gracefully.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Optional

import grpc
from grpc_health.v1 import health, health_pb2

from ... import local_receivers
from ...canon import DigestKey, load_key
from ...fingerprint import Fingerprinter
from ...policy import Policy, load_policy
from ..config import ConfigError, ReceiverConfig, parse_headers, split_host_port
from ..ingest.dedupe import SpanDeduper
from ..ops import pauses
from ..ops.budget import MemoryBudget, dedupe_entries, forward_queue_bytes, working_bytes
from ..ops.metrics import Metrics
from ..ops.security import CertificateStore, Tokens, load_certificates, load_tokens
from ..out.delivery import ForwardQueue, queue_for
from ..out.downstream import Downstream, channel_credentials
from ..out.finding_queue import FindingQueue
from ..out.phoenix import PhoenixAnnotator
from ..runs.assembly import RunAssembler
from ..state.directory import Opened, StateDir, StateDirBusy, open_state
from ..state.handover import Inbox, orphans, owner, successor
from ..front.listen import bind, grpc_server, listen_side, metrics_endpoint, warn_if_open
from .reload import Reloader
from .restore import judged_log, restore
from .running import Memory, Running, tick
from ..front.service import SERVICE, TraceReceiver
from ..front.takeover import Front

TOOK_OVER = "state directory taken over"  # logged once requests go to the service directly
LOCK_POLL_SECONDS = 0.02
LOCK_WARN_SECONDS = 10.0
SUCCESSOR_WAIT_SECONDS = 10.0

_log = logging.getLogger("otel_loopguard.receiver")


@dataclass(frozen=True, kw_only=True)
class _Settings:
    """What the config's files hold, read and checked before anything is built or bound."""

    policy: Policy
    key: DigestKey
    certificates: Optional[CertificateStore]
    tokens: Optional[Tokens]


@dataclass(frozen=True, kw_only=True)
class _Pipeline:
    """What handles spans, from the service that takes a request to the queues downstream."""

    forward_queue: Optional[ForwardQueue]
    findings: FindingQueue
    annotator: Optional[PhoenixAnnotator]
    assembler: RunAssembler
    deduper: SpanDeduper
    budget: MemoryBudget
    receiver: TraceReceiver


@dataclass(frozen=True, kw_only=True)
class _Ports:
    """The gRPC server and the metrics endpoint, bound, not yet serving."""

    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    metrics_server: Optional[asyncio.base_events.Server]
    metrics_port: Optional[int]


async def start(config: ReceiverConfig) -> Running:
    settings = _settings(config)
    metrics = Metrics()
    assert config.forward is not None  # validate() guarantees a downstream
    downstream = Downstream(target=config.forward, metrics=metrics, max_message_bytes=config.max_receive_bytes,
                            credentials=channel_credentials(config), headers=parse_headers(config.headers),
                            compression=config.compression)
    # The memory bound sets the caps it is made of (budget.py), for the in-memory and on-disk
    # state alike: the effective settings, resolved once.
    limit = working_bytes(config.memory_limit_mib)
    config = replace(config, dedupe_size=dedupe_entries(limit, config.dedupe_size),
                     forward_queue_bytes=forward_queue_bytes(limit, config.forward_queue_bytes))
    if config.state_dir:
        return await _take_over(config, settings, metrics, downstream, limit)
    pipeline = _pipeline(config, settings, metrics, downstream, None, limit)
    ports = await _ports(config, settings, pipeline.receiver.handler(), metrics, downstream, None)
    await _open(ports)
    tasks, reloader = await _serve(config, settings, metrics, pipeline, None)
    return _running(config, settings, metrics, downstream, pipeline, ports, tasks, reloader, None)


def _running(config: ReceiverConfig, settings: _Settings, metrics: Metrics, downstream: Downstream,
             pipeline: _Pipeline, ports: _Ports, tasks: list[asyncio.Task[None]], reloader: Reloader,
             state: Optional[Opened]) -> Running:
    note = _announce(config, settings, ports.port)
    return Running(server=ports.server, port=ports.port, receiver=pipeline.receiver, metrics=metrics,
                   assembler=pipeline.assembler, findings=pipeline.findings, downstream=downstream,
                   metrics_port=ports.metrics_port, _tasks=tasks, _metrics_server=ports.metrics_server,
                   _health=ports.health, reloader=reloader, forward_queue=pipeline.forward_queue,
                   annotator=pipeline.annotator, note=note, state=state)


async def _take_over(config: ReceiverConfig, settings: _Settings, metrics: Metrics, downstream: Downstream,
                     limit: int) -> Running:
    """With a state directory: the port first, every request answered into the inbox; the state
    once the predecessor (if any) has released it; then the inboxes replayed and requests served
    directly (state/handover.py, front/takeover.py)."""
    started = time.monotonic()
    claim = _claim_or_follow(config)
    front = Front(claim.inbox)
    try:
        listening = await _ports(config, settings, front.handler(), metrics, downstream, None, checked=claim.owned)
    except BaseException:
        claim.release(remove=True)
        raise
    await _open(listening)
    claim.inbox.listening()
    _ask_to_stop(claim.predecessor, config.listen)
    try:
        state = await _state(config, claim)
        # Restoring (snapshot, requests a crash left unjudged) takes a while: off the event loop,
        # which keeps answering into the inbox. Nothing built here is used before it returns.
        pipeline = await asyncio.to_thread(_pipeline, config, settings, metrics, downstream, state, limit)
    except BaseException:  # what was answered into the inbox stays there for the next owner
        await listening.server.stop(None)
        claim.release(remove=front.taken_in == 0)
        raise
    ports = await _with_metrics(config, settings, metrics, downstream, state, listening, claim, front)
    tasks, reloader = await _serve(config, settings, metrics, pipeline, state)
    replayed = await front.replay(pipeline.receiver, orphans(state.state.path))
    claim.inbox.close(remove=True)
    _log.info("%s after %.2f s (%s); %d requests taken in meanwhile replayed", TOOK_OVER,
              time.monotonic() - started, f"from pid {claim.predecessor}" if claim.predecessor else "none running",
              replayed)
    return _running(config, settings, metrics, downstream, pipeline, ports, tasks, reloader, state)


@dataclass(kw_only=True)
class _Claim:
    """The state directory's lock (None while a predecessor holds it) and this process's inbox."""

    lock: Optional[StateDir]
    inbox: Inbox
    predecessor: Optional[int]

    @property
    def owned(self) -> bool:
        return self.lock is not None

    def release(self, remove: bool) -> None:
        self.inbox.close(remove=remove)
        if self.lock is not None:
            self.lock.close()


def _claim_or_follow(config: ReceiverConfig) -> _Claim:
    """The lock at once, or the running owner's pid when it listens where this one will (its
    successor); another owner is an error, as before (directory.py)."""
    assert config.state_dir is not None
    try:
        lock: Optional[StateDir] = StateDir(config.state_dir, config.state_fsync, config.listen)
        predecessor = None
    except StateDirBusy as busy:
        pid, listen = owner(Path(config.state_dir))
        if listen != config.listen or split_host_port(config.listen)[1] == 0:
            raise ConfigError(f"{busy}; it listens on {listen or 'an unknown address'}: a successor taking over "
                              f"must listen on the same address") from None
        lock, predecessor = None, pid
    try:
        inbox = Inbox(Path(config.state_dir), config.state_fsync)
    except OSError as exc:
        if lock is not None:
            lock.close()
        raise ConfigError(f"state_dir: cannot use {config.state_dir}: {exc.strerror or exc}") from None
    return _Claim(lock=lock, inbox=inbox, predecessor=predecessor)


def _ask_to_stop(pid: Optional[int], listen: str) -> None:
    """The predecessor stops accepting now that this process listens beside it (it waits for that)."""
    if pid is None:
        return
    _log.info("listening on %s beside pid %d, which holds the state directory: asking it to stop "
              "(requests meanwhile are answered and kept in this process's inbox)", listen, pid)
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError as exc:  # gone already (its lock goes with it), or not ours to signal
        _log.warning("cannot signal pid %d (%s): waiting for it to release the state directory", pid,
                     exc.strerror or exc)


async def _state(config: ReceiverConfig, claim: _Claim) -> Opened:
    """The lock once the predecessor let it go (after its last write), then what it left, read
    in a worker thread while the port keeps answering."""
    assert config.state_dir is not None
    waited = time.monotonic()
    while claim.lock is None:
        try:
            claim.lock = StateDir(config.state_dir, config.state_fsync, config.listen)
        except StateDirBusy:
            if time.monotonic() - waited > LOCK_WARN_SECONDS:
                _log.warning("still waiting for pid %s to release the state directory %s (requests are kept "
                             "in this process's inbox meanwhile)", claim.predecessor, config.state_dir)
                waited = time.monotonic()
            await asyncio.sleep(LOCK_POLL_SECONDS)
    return await asyncio.to_thread(open_state, config, claim.lock)


def _settings(config: ReceiverConfig) -> _Settings:
    """A bad file stops startup here, with its setting's name, before anything is bound."""
    policy = load_policy(config.policy)
    key = load_key(key_file=config.key_file) if config.key_file else load_key()
    loaded = load_certificates(config)
    certificates = CertificateStore(loaded) if loaded is not None else None
    tokens = Tokens(load_tokens(config)) if config.auth_token_file or config.auth_tokens else None
    return _Settings(policy=policy, key=key, certificates=certificates, tokens=tokens)


def _pipeline(config: ReceiverConfig, settings: _Settings, metrics: Metrics, downstream: Downstream,
              state: Optional[Opened], limit: int) -> _Pipeline:
    """The queues (holding first what the previous process left undelivered), the run assembler
    (going on where that process stopped), the dedupe table, the memory bound over them all and
    the service that takes requests."""
    annotator = _annotator(config, metrics)
    forward_queue, findings = _queues(config, downstream, metrics, state, annotator)
    fp = Fingerprinter(settings.key, settings.policy)
    judged, done = judged_log(state) if state is not None else (None, {})
    assembler = (RunAssembler.restored(fp, config, metrics, restore=partial(restore, config, state, judged, done),
                                       on_complete=judged.completed if judged is not None else None)
                 if state is not None else RunAssembler(fp, config, metrics))
    deduper = state.deduper if state is not None else SpanDeduper(config.dedupe_size, config.dedupe_seconds)
    budget = MemoryBudget(limit_bytes=limit, max_open_runs=config.max_open_runs,
                          max_buffered_calls=config.max_buffered_calls, deduper=deduper, assembler=assembler,
                          findings=findings, queue=forward_queue)
    receiver = TraceReceiver(config=config, assembler=assembler, deduper=deduper, downstream=downstream,
                             findings=findings, metrics=metrics, forward_queue=forward_queue, budget=budget,
                             judged=judged)
    return _Pipeline(forward_queue=forward_queue, findings=findings, annotator=annotator, assembler=assembler,
                     deduper=deduper, budget=budget, receiver=receiver)


def _queues(config: ReceiverConfig, downstream: Downstream, metrics: Metrics, state: Optional[Opened],
            annotator: Optional[PhoenixAnnotator]) -> tuple[Optional[ForwardQueue], FindingQueue]:
    """The forward queue (inline mode) and the finding queue, on disk with a state directory,
    holding first what the previous process left undelivered."""
    forward_queue = queue_for(None if config.findings_only else downstream, metrics,
                              capacity_bytes=config.forward_queue_bytes, consumers=config.forward_consumers,
                              attempt_seconds=config.forward_timeout_seconds,
                              spool=state.spool if state is not None else None)
    findings = FindingQueue(downstream=downstream, metrics=metrics, timeout=config.forward_timeout_seconds,
                            after=forward_queue,
                            spool=state.findings if state is not None else None,
                            on_delivered=annotator.offer if annotator is not None else None)
    if state is not None:
        if forward_queue is not None:
            forward_queue.requeue(state.recovered)
        findings.requeue(state.findings_recovered)
    return forward_queue, findings


def _annotator(config: ReceiverConfig, metrics: Metrics) -> Optional[PhoenixAnnotator]:
    """The opt-in Phoenix trace annotations, fed with the finding spans the downstream took."""
    if not config.annotate_phoenix_url:
        return None
    return PhoenixAnnotator(url=config.annotate_phoenix_url, api_key=config.phoenix_api_key, metrics=metrics,
                            timeout=config.forward_timeout_seconds)


async def _ports(config: ReceiverConfig, settings: _Settings, handler: grpc.GenericRpcHandler, metrics: Metrics,
                 downstream: Downstream, state: Optional[Opened], checked: bool = True) -> _Ports:
    """Both ports bound, metrics first: a bad metrics address leaves no gRPC port bound behind
    it. On failure what was opened is closed again. `checked`: refuse a port in use (False: a
    successor, binding beside its predecessor; its metrics port comes after the takeover)."""
    server, health_servicer = grpc_server(config, handler, metrics, settings.tokens)
    try:
        metrics_server, metrics_port = (await metrics_endpoint(metrics, config.metrics_listen, settings.certificates,
                                                               settings.tokens)
                                        if not config.state_dir else (None, None))
    except OSError as exc:
        await _close(downstream, state)
        raise OSError(f"cannot serve metrics on {config.metrics_listen}: {exc.strerror or exc}") from None
    port, problem = bind(server, config.listen, settings.certificates, checked)
    if port == 0:
        if metrics_server is not None:
            metrics_server.close()
        await _close(downstream, state)
        raise OSError(f"cannot listen on {config.listen} ({problem or 'in use, or not an address of this host'})")
    return _Ports(server=server, port=port, health=health_servicer, metrics_server=metrics_server,
                  metrics_port=metrics_port)


async def _with_metrics(config: ReceiverConfig, settings: _Settings, metrics: Metrics, downstream: Downstream,
                        state: Opened, listening: _Ports, claim: _Claim, front: Front) -> _Ports:
    """With a state directory the metrics port is bound once the state is ours (the predecessor's
    is closed by then); on failure the receiver stops, its inbox kept for the next owner."""
    try:
        metrics_server, metrics_port = await metrics_endpoint(metrics, config.metrics_listen, settings.certificates,
                                                              settings.tokens)
    except OSError as exc:
        await listening.server.stop(None)
        await _close(downstream, state)
        claim.inbox.close(remove=front.taken_in == 0)
        raise OSError(f"cannot serve metrics on {config.metrics_listen}: {exc.strerror or exc}") from None
    return replace(listening, metrics_server=metrics_server, metrics_port=metrics_port)


async def _close(downstream: Downstream, state: Optional[Opened]) -> None:
    await downstream.close()
    if state is not None:
        state.close()


async def _open(ports: _Ports) -> None:
    """The gRPC port serving, health SERVING."""
    await ports.server.start()
    for name in ("", SERVICE):
        await ports.health.set(name, health_pb2.HealthCheckResponse.SERVING)


async def _serve(config: ReceiverConfig, settings: _Settings, metrics: Metrics, pipeline: _Pipeline,
                 state: Optional[Opened]) -> tuple[list[asyncio.Task[None]], Reloader]:
    """The queues' workers, the annotator, the timer and the reload watch."""
    pipeline.findings.start()
    if pipeline.forward_queue is not None:
        pipeline.forward_queue.start()
    if pipeline.annotator is not None:
        pipeline.annotator.start()
        _log.info("stop findings also go to Phoenix at %s as trace annotations named %r%s",
                  config.annotate_phoenix_url, "loopguard", " (with an API key)" if config.phoenix_api_key else "")
    memory = Memory(deduper=pipeline.deduper, budget=pipeline.budget, receiver=pipeline.receiver,
                    assembler=pipeline.assembler)
    ticker = asyncio.create_task(tick(pipeline.assembler, pipeline.findings, metrics, state, pipeline.receiver.judged,
                                      memory), name="loopguard-tick")
    tasks = [ticker]
    reloader = Reloader(config=config, key=settings.key, assembler=pipeline.assembler, metrics=metrics,
                        certificates=settings.certificates, tokens=settings.tokens)
    if reloader.watching and config.reload_poll_seconds > 0:
        tasks.append(asyncio.create_task(reloader.watch(config.reload_poll_seconds), name="loopguard-reload"))
    return tasks, reloader


def _announce(config: ReceiverConfig, settings: _Settings, port: int) -> Optional[Path]:
    """Say how this receiver serves; tell the apps on this machine where it listens."""
    mode = "findings-only" if config.findings_only else "inline"
    names = ",".join(k for k, _ in parse_headers(config.headers)) or "none"  # names only: values may be keys
    if config.headers and not config.tls:
        _log.warning("headers (%s) are sent in plaintext to %s; set certificate_file or insecure: false for TLS",
                     names, config.forward)
    host = config.listen.rpartition(":")[0]
    side = listen_side(config, settings.certificates, settings.tokens)
    _log.info("otel-loopguard receiver on %s:%d over %s (%s mode, downstream %s over %s, headers %s, compression %s, "
              "key id %s, policy %s)", host, port, side, mode, config.forward,
              "TLS" if config.tls else "plaintext", names, config.compression, settings.key.key_id,
              settings.policy.version)
    warn_if_open(config, settings.certificates, settings.tokens)
    # install() in an app on this machine reads it: an exporter aimed at `forward` bypasses us.
    return local_receivers.announce(f"{host}:{port}", config.forward)


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
    if config.state_dir:
        await successor_listening(Path(config.state_dir), announce=config.handover_wait_seconds)
    _log.info("shutting down: completing open runs and flushing findings")
    await started[0].stop()


async def successor_listening(state_dir: Path, timeout: float = SUCCESSOR_WAIT_SECONDS,
                              announce: float = 0.0) -> None:
    """On SIGTERM: if a successor announced itself (its inbox), or does so within `announce`
    seconds, wait for it to listen (bounded), so the port never closes; else return."""
    started = time.monotonic()
    while True:
        found = successor(state_dir)
        if found is not None and found[1]:
            _log.info("pid %s listens on this port and takes the state directory over: stopping", found[0])
            return
        waited = time.monotonic() - started
        if found is None and waited >= announce:
            return
        if found is not None and waited > announce + timeout:
            _log.warning("pid %s announced itself as successor but is not listening after %.0f s: stopping anyway",
                         found[0], waited)
            return
        await asyncio.sleep(LOCK_POLL_SECONDS)
