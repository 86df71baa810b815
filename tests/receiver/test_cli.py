"""`python -m otel_loopguard.cli serve` as a real process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from otel_loopguard.receiver.ops import trim

from .agent import LOOP, encode, record_spans
from .harness import RUN, Sink, attr, export_stub, findings_of

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OTEL_EXPORTER_OTLP") and not (k.startswith("OTEL_LOOPGUARD_") and k != "OTEL_LOOPGUARD_KEY")}
    env["OTEL_LOOPGUARD_KEY"] = os.environ["OTEL_LOOPGUARD_KEY"]
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _serve(*args: str, env: Optional[dict[str, str]] = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "otel_loopguard.cli", "serve", *args], cwd=ROOT,
                            env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_serving(port: int, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                time.sleep(0.1)
    raise AssertionError("serve never became healthy")


def test_serve_without_a_downstream_exits_2_with_a_clear_message() -> None:
    proc = _serve("--listen", f"127.0.0.1:{_free_port()}")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "otel-loopguard serve:" in err
    assert "no downstream" in err and "--forward" in err
    assert "Traceback" not in err


def test_findings_only_without_an_otlp_endpoint_exits_2() -> None:
    proc = _serve("--findings-only", "--listen", f"127.0.0.1:{_free_port()}")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in err


def test_a_malformed_forward_address_exits_2() -> None:
    proc = _serve("--forward", "no-port-here")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "forward" in err and "HOST:PORT" in err


def test_serve_starts_and_exits_0_on_sigterm_after_flushing_open_runs(sink: Sink) -> None:
    port = _free_port()
    proc = _serve("--listen", f"127.0.0.1:{port}", "--forward", f"127.0.0.1:{sink.port}",
                  "--idle-timeout-seconds", "60", "--root-grace-seconds", "60")
    try:
        _wait_serving(port, proc)
        trace_id, spans = record_spans(LOOP)
        channel, stub = export_stub(port)
        stub.Export(encode([s for s in spans if s.parent is not None]), timeout=10)  # the run stays open
        channel.close()
        assert sink.runs() == []
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        summary = sink.runs()
        assert len(summary) == 1 and attr(summary[0], "loopguard.run.id") == trace_id
        assert [attr(f, "loopguard.finding.severity") for f in findings_of(sink, kind="repeat")].count("stop") == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_serve_findings_only_uses_the_standard_otlp_endpoint(sink: Sink) -> None:
    port = _free_port()
    env = _env()
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{sink.port}"
    proc = _serve("--listen", f"127.0.0.1:{port}", "--findings-only", "--idle-timeout-seconds", "60", env=env)
    try:
        _wait_serving(port, proc)
        _, spans = record_spans(LOOP)
        channel, stub = export_stub(port)
        stub.Export(encode([s for s in spans if s.parent is not None]), timeout=10)
        channel.close()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert {s.name.split(" ", 1)[0] for s in sink.spans()} == {"loopguard.finding", "loopguard.run"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGINT])
def test_serve_exits_0_on_sigint(sink: Sink, sig: int) -> None:
    port = _free_port()
    proc = _serve("--listen", f"127.0.0.1:{port}", "--forward", f"127.0.0.1:{sink.port}")
    try:
        _wait_serving(port, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not trim.available(), reason="glibc only (malloc_trim)")
@pytest.mark.parametrize(("given", "runs_with"), [(None, "malloc"), ("pymalloc", "pymalloc")])
def test_serve_runs_under_the_allocator_that_gives_memory_back_unless_told_otherwise(given: Optional[str],
                                                                                     runs_with: str) -> None:
    """receiver/ops/trim.py: the process replaces itself once, keeping its id, with PYTHONMALLOC=malloc;
    a PYTHONMALLOC already set is kept (the way to opt out)."""
    env = {k: v for k, v in _env().items() if k != "PYTHONMALLOC"}
    if given:
        env["PYTHONMALLOC"] = given
    port = _free_port()
    proc = _serve("--listen", f"127.0.0.1:{port}", "--forward", f"127.0.0.1:{_free_port()}", env=env)
    try:
        _wait_serving(port, proc)
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")  # the same id serves
        assert f"PYTHONMALLOC={runs_with}".encode() in environ
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
