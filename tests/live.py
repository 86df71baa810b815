"""Real processes for end-to-end tests: ports, environments, the receiver as a subprocess.

Everything here listens on and talks to 127.0.0.1 only. Child processes get the test's
environment without proxy settings (a proxy would take loopback traffic elsewhere) and with
unbuffered Python output, so their logs are complete when a test reads them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
PROXY_VARS = ("http_proxy", "https_proxy", "grpc_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(drop: Callable[[str], bool] = lambda _k: False, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not drop(k) and k not in PROXY_VARS}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop(proc: subprocess.Popen, *, group: bool = False, first: int = signal.SIGTERM) -> Optional[int]:
    """End a process this test started, bounded: `first`, then SIGKILL. Returns its exit status."""
    for sig, wait in ((first, 15), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.poll()


def wait_until(done: Callable[[], Any], timeout: float, what: str, *, every: float = 0.25,
               explain: Callable[[], str] = lambda: "") -> Any:
    """Poll `done` until it returns something true; fail with `what` (and `explain()`) after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = done()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (after {timeout:.0f} s)\n{explain()}")
        time.sleep(every)


def serve_health(port: int, ca: Optional[Path] = None) -> bool:
    """True when a gRPC health service on the port answers SERVING (over TLS trusting `ca`, if given)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    target, options = f"127.0.0.1:{port}", [("grpc.enable_http_proxy", 0)]
    channel = (grpc.secure_channel(target, grpc.ssl_channel_credentials(ca.read_bytes()), options=options) if ca
               else grpc.insecure_channel(target, options=options))
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


@dataclass
class ReceiverProcess:
    """`otel-loopguard serve` in a subprocess, on a fixed port so that it can be restarted there."""

    args: Sequence[str]
    env: dict[str, str]
    logdir: Path
    port: int = field(default_factory=free_port)
    ca: Optional[Path] = None  # the CA of its --tls-cert-file, when it serves TLS
    proc: Optional[subprocess.Popen] = None
    starts: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def stderr(self) -> Path:
        return self.logdir / f"receiver-{self.port}-{self.starts}.err"

    def start(self, timeout: float = 30) -> "ReceiverProcess":
        self.starts += 1
        command = [sys.executable, "-m", "otel_loopguard.cli", "serve", "--listen", self.address, *self.args]
        with self.stderr.open("w") as err:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err)
        proc = self.proc

        def ready() -> bool:
            assert proc.poll() is None, f"receiver exited with {proc.returncode}:\n{tail(self.stderr)}"
            return serve_health(self.port, self.ca)

        wait_until(ready, timeout, "the receiver never became healthy", explain=lambda: tail(self.stderr))
        return self

    def stop(self, sig: int = signal.SIGTERM) -> Optional[int]:
        return stop(self.proc, first=sig) if self.proc is not None else None

    def logs(self) -> str:
        return "\n".join((self.logdir / f"receiver-{self.port}-{n}.err").read_text(errors="replace")
                         for n in range(1, self.starts + 1))


def go_built(script: str, what: str, needed_by: str) -> str:
    """Path of a program scripts/<script> builds with Go (the Collector, Jaeger); on CI
    (CI=true) a missing build fails, elsewhere it skips saying why."""
    import shutil

    import pytest

    found = subprocess.run(["bash", str(ROOT / "scripts" / script), "--path"], capture_output=True, text=True)
    if found.returncode == 0:
        return found.stdout.strip()
    if shutil.which("go") is None:
        why = (f"{needed_by} need Go to build {what}: install it (Debian: apt-get install golang-go), "
               f"then run bash scripts/{script}")
    else:
        why = f"{what} is not built yet: run bash scripts/{script} (scripts/test.sh does)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)
