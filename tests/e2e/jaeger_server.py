"""A real Jaeger for the end-to-end test: the build, a loopback configuration, a process, its query API.

The binary is the one `scripts/jaeger.sh` builds from the Go module proxy (Jaeger's `cmd/jaeger`,
module v1.75.0, the approved release: the all-in-one of Jaeger v2, an OpenTelemetry Collector
distribution, built without the UI's web assets, so it serves no UI). It runs with in-memory
storage and the configuration docs/deployment.md gives, as written there except for the
addresses: its OTLP/gRPC receiver and its query service (the HTTP JSON API the Jaeger UI reads,
`/api/...`) on 127.0.0.1 and free ports, and nothing else listening (no Jaeger, Zipkin or
sampling endpoints, no metrics port).
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import yaml

from live import ROOT, child_env, free_port, go_built, stop, tail, wait_until

_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def binary() -> str:
    """Path of the built Jaeger; on CI a missing build fails, elsewhere it skips saying why."""
    return go_built("jaeger.sh", "Jaeger", "the Jaeger tests")


def config(otlp_port: int, query_port: int) -> dict[str, Any]:
    """docs/deployment.md's Jaeger configuration, as written there, on 127.0.0.1 and free ports."""
    text = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    block = text.split("```yaml\n# jaeger-loopguard.yaml", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    doc = yaml.safe_load(block)
    query = doc["extensions"]["jaeger_query"]
    assert (query["http"]["endpoint"], query["grpc"]["endpoint"]) == ("localhost:16686", "localhost:16685")
    query["http"]["endpoint"] = f"127.0.0.1:{query_port}"
    query["grpc"]["endpoint"] = f"127.0.0.1:{free_port()}"
    receivers = doc["receivers"]["otlp"]["protocols"]
    assert list(receivers) == ["grpc"] and receivers["grpc"]["endpoint"] == "localhost:4317"
    receivers["grpc"]["endpoint"] = f"127.0.0.1:{otlp_port}"
    return doc


@dataclass
class Jaeger:
    workdir: Path
    otlp_port: int = field(default_factory=free_port)
    query_port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None

    @property
    def log(self) -> Path:
        return self.workdir / "jaeger.log"

    def start(self, timeout: float = 60) -> "Jaeger":
        path = self.workdir / "jaeger.yaml"
        path.write_text(yaml.safe_dump(config(self.otlp_port, self.query_port), sort_keys=False), encoding="utf-8")
        with self.log.open("w") as out:
            self.proc = subprocess.Popen([binary(), "--config", str(path)], cwd=self.workdir, env=child_env(),
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        wait_until(self._ready, timeout, "Jaeger never answered on its query port", explain=lambda: tail(self.log))
        return self

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, f"Jaeger exited:\n{tail(self.log)}"
        try:
            return "data" in self.api("/api/services")
        except OSError:
            return False

    def api(self, path: str, **query: str) -> Any:
        """GET the query service's HTTP JSON API (the one the Jaeger UI reads)."""
        url = f"http://127.0.0.1:{self.query_port}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        with _HTTP.open(url, timeout=10) as reply:
            return json.loads(reply.read())

    def trace(self, trace_id: str) -> Optional[dict[str, Any]]:
        """One trace as Jaeger's model: spans with tags, references, logs; None while unknown."""
        try:
            data = self.api(f"/api/traces/{trace_id}")["data"]
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
        return data[0] if data else None

    def search(self, service: str, tags: dict[str, str]) -> list[str]:
        """Trace ids the search lists (the UI's Search form: a service and tags; the server's
        default lookback)."""
        found = self.api("/api/traces", service=service, tags=json.dumps(tags), limit="50")
        return sorted(t["traceID"] for t in found["data"] or [])

    def stop(self) -> Optional[int]:
        return stop(self.proc) if self.proc is not None else None


@contextmanager
def running_jaeger(workdir: Path) -> Iterator[Jaeger]:
    jaeger = Jaeger(workdir)
    try:
        yield jaeger.start()
    finally:
        jaeger.stop()
