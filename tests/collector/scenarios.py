"""Pipelines of real processes on loopback: app -> Collector -> otel-loopguard -> backend.

Each scenario starts the shipped Collector configuration (otelcol.fill: placeholders only),
`otel-loopguard serve` processes, the counting backend and, where the scenario is about what
users run, the agent app in its own process (app.py: `install()` and the SDK's default
exporter). It returns what it counted, so tests assert on it and bench/bench_collector.py
prints it for docs/deployment.md.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import grpc

from live import ROOT, ReceiverProcess, child_env, free_port, tail, wait_until  # noqa: F401 (wait_until: tests)

from otel_loopguard.findings import INTEGRITY_KINDS

from .backend import CountingBackend, Stored
from .otelcol import Collector, fill
from .ports import reserved_port

APP = Path(__file__).resolve().parent / "app.py"
KEY = "collector-tests-key-0123456789abcdef"  # one digest key for the app and every receiver
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@dataclass(frozen=True)
class Secrets:
    """What the configs' EDIT lines ask for between the Collector and the receivers: a CA, the
    receivers' certificate (localhost, 127.0.0.1) and a bearer token (the Collector's LOOPGUARD_TOKEN)."""

    ca: Path
    cert: Path
    key: Path
    tokens: Path
    token: str

    @classmethod
    def make(cls, directory: Path) -> "Secrets":
        import secrets

        from receiver.pki import make_pki

        pki = make_pki(directory, "loopguard-ca")
        token = secrets.token_urlsafe(24)
        tokens = directory / "tokens"
        tokens.write_text(token + "\n", encoding="utf-8")
        return cls(pki["ca"], pki["server_cert"], pki["server_key"], tokens, token)

    def serve_args(self) -> list[str]:
        return ["--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key), "--auth-token-file", str(self.tokens)]


def receiver_env(findings_to: Optional[int] = None) -> dict[str, str]:
    env = child_env(lambda k: k.startswith(("OTEL_EXPORTER_OTLP", "OTEL_LOOPGUARD_")), OTEL_LOOPGUARD_KEY=KEY)
    if findings_to is not None:
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{findings_to}"
    return env


def receivers(n: int, logdir: Path, args: Sequence[str], findings_to: Optional[int] = None,
              secrets: Optional[Secrets] = None) -> list[ReceiverProcess]:
    """n receivers with a metrics endpoint each (not started: the Collector config needs their addresses
    first), serving TLS with a token when given `secrets`, as the configs' commands show."""
    extra = secrets.serve_args() if secrets else []
    return [ReceiverProcess(["--root-grace-seconds", "1", *args, *extra, "--metrics-listen",
                             f"127.0.0.1:{reserved_port()}"], receiver_env(findings_to), logdir, port=reserved_port(),
                            ca=secrets.ca if secrets else None) for _ in range(n)]


# -- the app ------------------------------------------------------------------------------


@dataclass
class App:
    proc: subprocess.Popen
    out: Path
    log: Path

    def result(self, timeout: float = 120) -> dict[str, Any]:
        assert self.proc.wait(timeout) == 0, f"the app failed:\n{tail(self.log)}"
        return json.loads(self.out.read_text())


def start_app(collector_port: int, workdir: Path, *, runs: int, rate: float, conversations: bool = False,
              processor: bool = True) -> App:
    out, log = workdir / "app.json", workdir / "app.log"
    env = child_env(lambda k: k.startswith("OTEL_"), OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector_port}",
                    OTEL_SERVICE_NAME="collector-test-app", OTEL_LOOPGUARD_KEY=KEY)
    command = [sys.executable, str(APP), "--out", str(out), "--runs", str(runs), "--rate", str(rate)]
    with log.open("w") as err:
        flags = (["--conversations"] if conversations else []) + ([] if processor else ["--no-processor"])
        proc = subprocess.Popen(command + flags, cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT)
    return App(proc, out, log)


def created(result: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t, s) for t, spans in result["spans"].items() for s in spans}


def send_raw(port: int, payloads: Sequence[bytes]) -> None:
    """Serialized ExportTraceServiceRequests to an OTLP/gRPC endpoint, as they are."""
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)]) as channel:
        export = channel.unary_unary(EXPORT)
        for data in payloads:
            export(data, timeout=30, wait_for_ready=True)


# -- what the backend got -----------------------------------------------------------------


@dataclass
class Delivery:
    """Spans the app created against what the backend stored, and what was found."""

    created: int
    unique: int
    lost: int
    duplicated: int
    loops: int
    loops_stopped: int
    loops_incomplete: int
    healthy_flagged: int  # healthy runs with a loop finding at warn or above
    runs_incomplete: int  # runs with an incomplete_trace finding (calls missing: a restart cut them)
    summaries: int
    unjudged: int  # runs that never got a summary (no loopguard.run span)
    cut_passing: int = 0  # runs with a summary scored as passing on fewer calls than the app made
    loops_missed: int = 0  # loops neither stopped nor marked incomplete
    finding_duplicates: int = 0  # finding and run spans stored twice (the same span id sent again)
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "extra"}, **self.extra}


def run_id(s: Stored) -> str:
    return str(s.attributes.get("loopguard.run.id", s.trace_id))


def by_run(stored: Sequence[Stored]) -> dict[str, list[Stored]]:
    out: dict[str, list[Stored]] = {}
    for s in stored:
        out.setdefault(run_id(s), []).append(s)
    return out


def delivery(backend: CountingBackend, result: dict[str, Any]) -> Delivery:
    counts = backend.app_counts()
    spans = created(result)
    _, findings, summaries = backend.snapshot()
    found = by_run(findings)

    def stopped(run: str) -> bool:
        return any(f.kind == "repeat" and f.severity == "stop" for f in found.get(run, []))

    def incomplete(run: str) -> bool:
        return any(f.kind == "incomplete_trace" for f in found.get(run, []))

    def flagged(run: str) -> bool:  # a loop verdict; missing evidence (incomplete_trace) is counted apart
        return any(f.severity in ("warn", "stop") and f.kind not in INTEGRITY_KINDS for f in found.get(run, []))

    loops, healthy = result["loops"], result["healthy"]
    return Delivery(
        created=len(spans),
        unique=len(spans & set(counts)),
        lost=len(spans - set(counts)),
        duplicated=sum(n - 1 for k, n in counts.items() if k in spans),
        loops=len(loops),
        loops_stopped=sum(stopped(r) for r in loops),
        loops_incomplete=sum(incomplete(r) and not stopped(r) for r in loops),
        healthy_flagged=sum(flagged(r) for r in healthy),
        runs_incomplete=sum(incomplete(r) for r in [*loops, *healthy]),
        summaries=len(summaries),
        unjudged=len((set(loops) | set(healthy)) - set(by_run(summaries))),
        cut_passing=sum(_cut_passing(by_run(summaries).get(r, [])) for r in [*loops, *healthy]),
        loops_missed=sum(not stopped(r) and not incomplete(r) for r in loops),
        finding_duplicates=_stored_twice(backend, [*findings, *summaries]),
    )


def _stored_twice(backend: CountingBackend, ours: Sequence[Stored]) -> int:
    ids = {(f.trace_id, f.span_id) for f in ours}
    return sum(n - 1 for key, n in backend.snapshot()[0].items() if key in ids)


def _cut_passing(summaries: Sequence[Stored], calls: int = 6) -> bool:
    """A summary scored as passing on part of a run (the app makes `calls` calls a run)."""
    return any(s.attributes.get("loopguard.run.outcome") == "scored"
               and s.attributes.get("loopguard.score.release.passed") is True
               and (s.attributes.get("loopguard.score.tool_calls") or 0) < calls for s in summaries)


def wait_delivered(backend: CountingBackend, result: dict[str, Any], timeout: float, *, quiet: float = 12.0,
                   explain: Callable[[], str] = lambda: "") -> Delivery:
    """Until every created span is stored (or fail saying what is missing), then until every run has a
    summary or none has come for `quiet` seconds (more than the receivers' gap wait): a run that a
    crash cut may never get one, and that is counted (`unjudged`), not waited for."""
    spans = created(result)
    runs = set(result["loops"]) | set(result["healthy"])

    def missing() -> str:
        return f"{delivery(backend, result).row()}\n{explain()}"

    wait_until(lambda: spans <= set(backend.app_counts()), timeout, "the backend did not get every span",
               every=0.5, explain=missing)
    last, since = -1, time.monotonic()
    while not runs <= set(by_run(backend.snapshot()[2])) and time.monotonic() - since < quiet:
        now = len(backend.snapshot()[2])
        last, since = (now, time.monotonic()) if now != last else (last, since)
        time.sleep(0.5)
    time.sleep(1.0)  # anything delivered twice has arrived by now
    return delivery(backend, result)


# -- the layouts ----------------------------------------------------------------------------


@dataclass
class Layout:
    collector: Collector
    receivers: list[ReceiverProcess]
    backend: CountingBackend
    secrets: Secrets

    def explain(self) -> str:
        return "\n".join([f"collector log:\n{tail(self.collector.log, 25)}",
                          *(f"receiver {r.port}:\n{tail(r.stderr, 15)}" for r in self.receivers)])

    def stop(self) -> None:
        for r in self.receivers:
            r.stop()
        self.collector.stop()
        self.backend.down()


def fanout(workdir: Path, collector_token: Optional[str] = None, backend_address: Optional[str] = None) -> Layout:
    """fanout.yaml: the Collector sends every span to the backend and a copy to a --findings-only receiver
    (`collector_token`: give the Collector another token than the receiver accepts; `backend_address`:
    a real backend instead of the counting one, which then gets nothing)."""
    backend, secrets = CountingBackend(), Secrets.make(workdir)
    (lg,) = receivers(1, workdir, ["--findings-only"], secrets=secrets)
    filled = fill("fanout.yaml", backend=backend_address or backend.address, loopguard=[lg.address], ca=secrets.ca)
    lg.env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{filled.ports['otlp/findings']}"
    return Layout(_collector(filled, workdir, secrets, collector_token), [lg.start()], backend, secrets)


def _collector(filled: Any, workdir: Path, secrets: Secrets, token: Optional[str] = None) -> Collector:
    return Collector(filled, workdir, {"LOOPGUARD_TOKEN": token or secrets.token}).start()


def inline(workdir: Path, on_disk: bool = True) -> Layout:
    """inline-with-collector.yaml: Collector -> receiver --forward -> Collector -> backend, queues on disk
    (`on_disk=False`: in memory, the exporters' default, for the negative control)."""
    backend, secrets = CountingBackend(), Secrets.make(workdir)
    (lg,) = receivers(1, workdir, [], secrets=secrets)
    filled = fill("inline-with-collector.yaml", backend=backend.address, loopguard=[lg.address],
                  storage=workdir / "file_storage", ca=secrets.ca)
    if not on_disk:
        for exporter in filled.doc["exporters"].values():
            exporter["sending_queue"].pop("storage", None)
    # As the config's command: answered only once the spans are back in the Collector.
    lg.args = ["--forward", f"127.0.0.1:{filled.ports['otlp/guarded']}", "--forward-queue-bytes", "0", *lg.args]
    return Layout(_collector(filled, workdir, secrets), [lg.start()], backend, secrets)


def sharded(workdir: Path, config: str = "sharded.yaml", replicas: int = 2, args: Sequence[str] = ()) -> Layout:
    """A load-balancing config over `replicas` --findings-only receivers; findings come back to the Collector."""
    backend, secrets = CountingBackend(), Secrets.make(workdir)
    shards = receivers(replicas, workdir, ["--findings-only", *args], secrets=secrets)
    filled = fill(config, backend=backend.address, loopguard=[r.address for r in shards], ca=secrets.ca)
    for r in shards:
        r.env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{filled.ports['otlp/findings']}"
    return Layout(_collector(filled, workdir, secrets), [r.start() for r in shards], backend, secrets)


def spans_received(receiver: ReceiverProcess, secrets: Optional[Secrets] = None,
                   metric: str = "otel_loopguard_spans_received_total") -> float:
    """A counter of the receiver (by default the spans it took) from its --metrics-listen endpoint, which
    takes the same TLS and token as its gRPC port."""
    import ssl
    import urllib.request

    port = receiver.args[list(receiver.args).index("--metrics-listen") + 1].rpartition(":")[2]
    handlers: list[Any] = [urllib.request.ProxyHandler({})]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if secrets is not None:
        handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=str(secrets.ca))))
        request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics",
                                         headers={"Authorization": f"Bearer {secrets.token}"})
    with urllib.request.build_opener(*handlers).open(request, timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(metric):
                return float(line.split()[-1])
    return 0.0


def finding_set(stored: Sequence[Stored]) -> Counter[tuple[Any, ...]]:
    return Counter(s.same_finding() for s in stored)


def summary_set(stored: Sequence[Stored]) -> Counter[tuple[Any, ...]]:
    def frozen(v: Any) -> Any:
        return tuple(v) if isinstance(v, list) else v

    return Counter((s.trace_id, s.parent_id, s.name, tuple(sorted((k, frozen(v)) for k, v in s.attributes.items())))
                   for s in stored)


def signal_at(proc_getter: Callable[[], Any], when: float, sig: int) -> None:
    """Sleep until `when` (monotonic), then send `sig` to the process."""
    time.sleep(max(0.0, when - time.monotonic()))
    proc = proc_getter()
    if proc is not None and proc.poll() is None:
        proc.send_signal(sig)



def bench_mix(copies: int, synthetic_runs: int) -> list[bytes]:
    """Requests from bench/bench_receiver.py: the recorded real captures (`copies` times each under fresh
    ids) and `synthetic_runs` GenAI agent runs without processor tags, one in five of them looping."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_receiver", ROOT / "bench" / "bench_receiver.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [*module.recorded_requests(copies), *module.requests_for(synthetic_runs, tagged=False)]


def trace_ids(payloads: Sequence[bytes]) -> set[str]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return {s.trace_id.hex() for data in payloads for rs in ExportTraceServiceRequest.FromString(data).resource_spans
            for ss in rs.scope_spans for s in ss.spans}


def judged_by_one(workdir: Path, payloads: Sequence[bytes], traces: int) -> CountingBackend:
    """The reference: one receiver given the payloads directly; its findings land in a backend of their own."""
    backend = CountingBackend()
    (lg,) = receivers(1, workdir, ["--findings-only"], findings_to=backend.port)
    lg.start()
    try:
        send_raw(lg.port, payloads)
        wait_until(lambda: len(backend.snapshot()[2]) >= traces, 60, "the single receiver did not judge every run",
                   explain=lambda: tail(lg.stderr))
        time.sleep(1.0)
    finally:
        lg.stop()
    return backend


# -- scenarios with failures ----------------------------------------------------------------


def _restart(receiver: ReceiverProcess, sig: int) -> float:
    """Stop a receiver with `sig` and start it again on its port; returns the seconds it was away."""
    t0 = time.monotonic()
    receiver.stop(sig)
    receiver.start()
    return time.monotonic() - t0


def shard_restart(workdir: Path, *, runs: int = 300, rate: float = 20, at: float = 5.0) -> Delivery:
    """sharded.yaml, two replicas; replica 1 restarted (SIGTERM) `at` seconds into the app's traffic."""
    layout = sharded(workdir)
    try:
        app = start_app(layout.collector.port("otlp"), workdir, runs=runs, rate=rate)
        time.sleep(at)
        away = _restart(layout.receivers[1], signal.SIGTERM)
        result = app.result()
        d = wait_delivered(layout.backend, result, 120, explain=layout.explain)
        d.extra.update(restart_seconds=round(away, 1), runs_split=_split_runs(layout.backend))
        return d
    finally:
        layout.stop()


def store_and_forward(workdir: Path, *, runs: int = 1000, rate: float = 20, outage: tuple[float, float] = (2, 32),
                      collector_at: float = 17, term_at: Optional[float] = 35, kill_at: Optional[float] = 42,
                      on_disk: bool = True) -> Delivery:
    """inline-with-collector.yaml (queues on disk): a backend outage, during which the Collector is
    restarted (SIGTERM: what it queued stays on disk); then the receiver SIGTERMed and restarted, then
    SIGKILLed and restarted, all while the app sends; then everything drains."""
    layout = inline(workdir, on_disk)
    try:
        start = time.monotonic()
        app = start_app(layout.collector.port("otlp"), workdir, runs=runs, rate=rate)
        time.sleep(max(0.0, start + outage[0] - time.monotonic()))
        layout.backend.down()
        time.sleep(max(0.0, start + collector_at - time.monotonic()))
        t0 = time.monotonic()
        layout.collector.stop(signal.SIGTERM)
        layout.collector.start()
        collector_away = time.monotonic() - t0
        time.sleep(max(0.0, start + outage[1] - time.monotonic()))
        layout.backend.up()
        term_away = kill_away = 0.0
        if term_at is not None:
            time.sleep(max(0.0, start + term_at - time.monotonic()))
            term_away = _restart(layout.receivers[0], signal.SIGTERM)
        if kill_at is not None:
            time.sleep(max(0.0, start + kill_at - time.monotonic()))
            kill_away = _restart(layout.receivers[0], signal.SIGKILL)
        result = app.result()
        if not on_disk:  # spans will be missing: give the queues time to drain, then count
            time.sleep(35)
            return delivery(layout.backend, result)
        d = wait_delivered(layout.backend, result, 240, explain=layout.explain)
        d.extra.update(outage_seconds=outage[1] - outage[0], collector_away=round(collector_away, 1),
                       sigterm_away=round(term_away, 1),
                       sigkill_away=round(kill_away, 1), runs_split=_split_runs(layout.backend),
                       drained_after=round(time.monotonic() - start - result["seconds"], 1))
        return d
    finally:
        layout.stop()


def _split_runs(backend: CountingBackend) -> int:
    """Runs with more than one summary: judged in pieces (a restart cut them)."""
    return sum(len(v) > 1 for v in by_run(backend.snapshot()[2]).values())
