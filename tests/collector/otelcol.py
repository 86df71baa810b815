"""The real OpenTelemetry Collector in tests: the build, a config with its placeholders filled, a process.

The binary is the one `scripts/otelcol.sh` builds from `collector_config/builder.yaml`. The
configurations are the shipped files, loaded as they are; only what their comments mark
EDIT (endpoints, replica lists, the storage directory) and the listening addresses are
replaced, all with 127.0.0.1 addresses and free ports. Nothing else is touched, so a test that
passes here ran the file users copy.
"""

from __future__ import annotations

import signal
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import yaml

from live import ROOT, child_env, go_built, stop, tail, wait_until

from .ports import reserved_port

CONFIG_DIR = ROOT / "collector_config"
MANIFEST = CONFIG_DIR / "builder.yaml"
CONFIGS = sorted(p for p in CONFIG_DIR.glob("*.yaml") if p != MANIFEST)
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def binary() -> str:
    """Path of the built Collector; on CI a missing build fails, elsewhere it skips saying why."""
    return go_built("otelcol.sh", "the Collector", "the Collector tests")


@dataclass
class Filled:
    """A shipped configuration with loopback addresses: the document and the ports it listens on."""

    doc: dict[str, Any]
    ports: dict[str, int] = field(default_factory=dict)  # receiver id -> gRPC port; "health", "metrics"

    def write(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump(self.doc, sort_keys=False), encoding="utf-8")
        return path


def fill(name: str, *, backend: str, loopguard: Sequence[str], storage: Optional[Path] = None,
         ca: Optional[Path] = None) -> Filled:
    """Load collector_config/<name> and point it at this machine's test processes (`ca`: the CA of
    the receivers' certificates, which name localhost and 127.0.0.1)."""
    doc = yaml.safe_load((CONFIG_DIR / name).read_text(encoding="utf-8"))
    filled = Filled(doc)
    for rid, receiver in doc.get("receivers", {}).items():
        for proto, settings in receiver["protocols"].items():
            port = reserved_port()
            settings["endpoint"] = f"127.0.0.1:{port}"
            if proto == "grpc":
                filled.ports[rid] = port
    for eid, exporter in doc.get("exporters", {}).items():
        _point_exporter(eid, exporter, backend, loopguard, ca)
    for xid, extension in (doc.get("extensions") or {}).items():
        if xid.split("/")[0] == "health_check":
            filled.ports["health"] = reserved_port()
            extension["endpoint"] = f"127.0.0.1:{filled.ports['health']}"
        elif xid.split("/")[0] == "file_storage":
            assert storage is not None, f"{name} persists its queues: give fill() a storage directory"
            extension["directory"] = str(storage)
    for reader in doc["service"].get("telemetry", {}).get("metrics", {}).get("readers", []):
        prometheus = reader["pull"]["exporter"]["prometheus"]
        filled.ports["metrics"] = reserved_port()
        prometheus.update(host="127.0.0.1", port=filled.ports["metrics"])
    return filled


def _point_exporter(eid: str, exporter: dict[str, Any], backend: str, loopguard: Sequence[str],
                    ca: Optional[Path]) -> None:
    kind, _, name = eid.partition("/")
    to_loopguard = kind in ("loadbalancing", "load_balancing") or name.startswith("loopguard")
    tls = (exporter.get("protocol", {}).get("otlp", exporter)).get("tls", {})
    if to_loopguard and ca is not None and "ca_file" in tls:
        tls["ca_file"] = str(ca)
        if "server_name_override" in tls:
            tls["server_name_override"] = "localhost"
    if kind in ("loadbalancing", "load_balancing"):
        resolver = exporter["resolver"]
        if "static" in resolver:
            resolver["static"]["hostnames"] = list(loopguard)
        else:  # dns: one name for every replica; here the address itself, all replicas on one port
            host, _, port = loopguard[0].rpartition(":")
            resolver["dns"].update(hostname=host, port=port)
    elif kind in ("otlp", "otlp_grpc"):
        exporter["endpoint"] = loopguard[0] if name.startswith("loopguard") else backend


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), "validate", "--config", str(path)], capture_output=True, text=True, timeout=60)


@dataclass
class Collector:
    """One Collector process running a filled configuration."""

    filled: Filled
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)  # e.g. LOOPGUARD_TOKEN, which the configs read
    proc: Optional[subprocess.Popen] = None

    @property
    def log(self) -> Path:
        return self.workdir / "otelcol.log"

    def port(self, receiver_id: str) -> int:
        return self.filled.ports[receiver_id]

    def start(self, timeout: float = 60) -> "Collector":
        config = self.filled.write(self.workdir / "otelcol.yaml")
        with self.log.open("a") as out:
            self.proc = subprocess.Popen([binary(), "--config", str(config)], cwd=self.workdir, env=child_env(**self.env),
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        wait_until(self._ready, timeout, "the Collector never became ready", explain=lambda: tail(self.log))
        return self

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, f"the Collector exited:\n{tail(self.log)}"
        try:
            with _HTTP.open(f"http://127.0.0.1:{self.filled.ports['health']}/", timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> Optional[int]:
        return stop(self.proc, first=sig) if self.proc is not None else None

    def metrics(self) -> str:
        with _HTTP.open(f"http://127.0.0.1:{self.filled.ports['metrics']}/metrics", timeout=5) as reply:
            return reply.read().decode()
