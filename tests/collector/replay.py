"""What the sharded test under load needs besides a layout: the documented replica command run
on loopback, the captures re-sent as SDK retries send them, and a bounded CPU load.

- `documented_replica`: the `otel-loopguard serve` command a shipped config's comment shows,
  parsed (test_replica_grace.serve_commands) and started with only its machine-specific values
  moved to this machine: the listening and metrics addresses, the TLS and token files, the
  findings endpoint. Every other flag (--findings-only, --root-grace-seconds ...) is kept as
  written; a value the test does not know how to move fails loudly rather than being dropped.
- `as_sdk_retries`: the spans of some requests cut into batches of varied sizes, the runs
  interleaved as an SDK's buffer fills with concurrent runs (each run's spans in their end
  order, the root last), every batch sent twice and the batches shuffled over the requests.
- `CpuLoad`: busy-loop processes, each bounded in time, stopped by the test (by their pid).
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import sys
from collections import defaultdict
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from live import ROOT, ReceiverProcess, stop

from .ports import reserved_port
from .scenarios import EXPORT, Secrets, receiver_env
from .test_replica_grace import receiver_settings, serve_commands

CONFIG_DIR = ROOT / "collector_config"

# Flags whose value names this machine: how each is moved to the test's loopback processes.
_LISTEN, _CERT, _KEY, _TOKENS, _METRICS = "--listen", "--tls-cert-file", "--tls-key-file", "--auth-token-file", "--metrics-listen"
_MOVED = (_LISTEN, _CERT, _KEY, _TOKENS, _METRICS)
_FINDINGS_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"


def documented_command(config: str = "sharded.yaml") -> str:
    """The one replica command the shipped file's comment shows."""
    commands = serve_commands((CONFIG_DIR / config).read_text(encoding="utf-8"))
    assert len(commands) == 1, f"{config}: expected one replica command in its comment, found {commands}"
    return commands[0]


@dataclass(frozen=True)
class ReplicaCommand:
    """A documented command, split: its environment, the flags kept as written, the flags moved."""

    text: str
    env: dict[str, str]
    kept: list[str]
    moved: dict[str, str]
    root_grace_seconds: float

    @classmethod
    def parse(cls, text: str) -> "ReplicaCommand":
        words = shlex.split(text)
        at = words.index("otel-loopguard")
        assert words[at + 1] == "serve", text
        env = dict(w.split("=", 1) for w in words[:at])
        kept: list[str] = []
        moved: dict[str, str] = {}
        rest = iter(words[at + 2:])
        for word in rest:
            flag, eq, inline = word.partition("=")
            if flag in _MOVED:
                moved[flag] = inline if eq else next(rest)
                continue
            kept.append(word)
        for word in kept:  # an address or a path left in the kept flags would point nowhere here
            assert not word.startswith(("/", "0.0.0.0", "localhost")) and ":" not in word, (
                f"the documented replica command has a machine-specific value the test does not move: {word!r} in {text}")
        unknown = set(env) - {_FINDINGS_ENV}
        assert not unknown, f"the documented replica command sets {unknown}: the test does not know how to move them"
        grace, _ = receiver_settings(text)
        return cls(text, env, kept, moved, grace)

    def args(self, secrets: Optional[Secrets], metrics_port: int) -> list[str]:
        """The serve arguments on this machine (ReceiverProcess adds --listen)."""
        moved: list[str] = []
        if secrets is not None:
            if _CERT in self.moved:
                moved += [_CERT, str(secrets.cert), _KEY, str(secrets.key)]
            if _TOKENS in self.moved:
                moved += [_TOKENS, str(secrets.tokens)]
        return [*self.kept, *moved, _METRICS, f"127.0.0.1:{metrics_port}"]


def documented_replica(command: ReplicaCommand, logdir: Path, findings_port: int, *,
                       secrets: Optional[Secrets] = None, override: Sequence[str] = ()) -> ReceiverProcess:
    """A replica as the command starts it, on loopback (not started). `secrets`: serve TLS with the
    token, as the command does (None: plaintext, for a reference receiver spoken to directly).
    `override`: flags appended after the documented ones (argparse: the last wins); only the
    negative control uses it."""
    env = receiver_env(findings_to=None)
    env[_FINDINGS_ENV] = f"http://127.0.0.1:{findings_port}"
    return ReceiverProcess([*command.args(secrets, reserved_port()), *override], env, logdir, port=reserved_port(),
                           ca=secrets.ca if secrets else None)


# -- the captures, re-sent as SDK retries do --------------------------------------------------


_Entry = tuple[int, bytes, int, Any]  # (end time, span id, resource and scope group, span)


@dataclass
class Replay:
    requests: list[bytes]  # in the order they are sent
    spans: int  # distinct spans
    copies: int  # spans over all requests (each twice)
    traces: set[str]
    batches: int
    seed: int


def as_sdk_retries(payloads: Sequence[bytes], seed: int, *, smallest: int = 8, largest: int = 96) -> Replay:
    """The spans of `payloads`, as an SDK whose export is retried sends them: the runs
    interleaved (each run's spans in their end order, the root last, as a batch span processor
    gets them), cut into batches of `smallest`..`largest` spans, every batch sent twice, and the
    batches shuffled over the requests (a retry goes out after later batches)."""
    rng = random.Random(seed)
    by_trace: dict[bytes, list[_Entry]] = defaultdict(list)
    groups: dict[int, tuple[bytes, bytes]] = {}
    for data in payloads:
        for rs in ExportTraceServiceRequest.FromString(data).resource_spans:
            for ss in rs.scope_spans:
                key = (rs.resource.SerializeToString(), ss.scope.SerializeToString())
                group = next((g for g, k in groups.items() if k == key), len(groups))
                groups[group] = key
                for span in ss.spans:
                    by_trace[span.trace_id].append((span.end_time_unix_nano, span.span_id, group, span))
    queues = [sorted(spans, key=lambda s: (s[0], s[1])) for spans in by_trace.values()]
    order = [q for q in queues for _ in q]
    rng.shuffle(order)  # which run's next span the buffer gets next
    heads = {id(q): 0 for q in queues}
    stream = []
    for q in order:
        stream.append(q[heads[id(q)]])
        heads[id(q)] += 1
    batches: list[list[_Entry]] = []
    at = 0
    while at < len(stream):
        size = rng.randint(smallest, largest)
        batches.append(stream[at:at + size])
        at += size
    sent = [b for b in batches for _ in range(2)]
    rng.shuffle(sent)

    def request(batch: list[_Entry]) -> bytes:
        out = ExportTraceServiceRequest()
        grouped: dict[int, list[Any]] = defaultdict(list)
        for _, _, group, span in batch:
            grouped[group].append(span)
        for group, spans in grouped.items():
            resource, scope = groups[group]
            rs = ResourceSpans()
            rs.resource.ParseFromString(resource)
            ss = ScopeSpans(spans=spans)
            ss.scope.ParseFromString(scope)
            rs.scope_spans.append(ss)
            out.resource_spans.append(rs)
        return out.SerializeToString()

    return Replay([request(b) for b in sent], len(stream), 2 * len(stream), {t.hex() for t in by_trace},
                  len(batches), seed)


def send_concurrently(port: int, requests: Sequence[bytes], senders: int = 4, timeout: float = 30) -> None:
    """The requests to an OTLP/gRPC endpoint, `senders` at a time (several exporters, or a retry
    while the original is still in flight), each taken in order by the next free sender."""
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)]) as channel:
        export = channel.unary_unary(EXPORT)
        with futures.ThreadPoolExecutor(senders) as pool:
            for done in [pool.submit(export, data, timeout=timeout, wait_for_ready=True) for data in requests]:
                done.result()


# -- CPU load ---------------------------------------------------------------------------------


_BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@dataclass
class CpuLoad:
    """`processes` busy loops (one per core of this 2-core machine by default), each of which ends
    by itself after `limit` seconds if the test could not stop it."""

    processes: int = 2
    limit: float = 600.0
    procs: list[subprocess.Popen] = field(default_factory=list)

    def start(self) -> "CpuLoad":
        for _ in range(self.processes):
            self.procs.append(subprocess.Popen([sys.executable, "-c", _BUSY.format(seconds=self.limit)],
                                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
        return self

    def cpu_seconds(self) -> float:
        """CPU time the busy loops have had so far (user + system, from /proc)."""
        total = 0.0
        for proc in self.procs:
            try:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def running(self) -> bool:
        return bool(self.procs) and all(p.poll() is None for p in self.procs)

    def stop(self) -> None:
        for proc in self.procs:
            stop(proc)


# -- what a replica says about itself -----------------------------------------------------------


def metrics(receiver: ReceiverProcess, secrets: Optional[Secrets] = None) -> dict[str, float]:
    """Every unlabelled series of the receiver's /metrics (labelled ones summed), by name without
    the otel_loopguard_ prefix."""
    import ssl
    import urllib.request

    port = receiver.args[list(receiver.args).index(_METRICS) + 1].rpartition(":")[2]
    handlers: list[object] = [urllib.request.ProxyHandler({})]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if secrets is not None:
        handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=str(secrets.ca))))
        request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics",
                                         headers={"Authorization": f"Bearer {secrets.token}"})
    out: dict[str, float] = defaultdict(float)
    with urllib.request.build_opener(*handlers).open(request, timeout=10) as reply:  # type: ignore[arg-type]
        for line in reply.read().decode().splitlines():
            if line.startswith("otel_loopguard_"):
                name, _, value = line.rpartition(" ")
                out[name.partition("{")[0].removeprefix("otel_loopguard_")] += float(value)
    return dict(out)
