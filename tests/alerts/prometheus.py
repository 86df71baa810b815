"""A real Prometheus for the alert tests: its programs, a loopback configuration, a process, its HTTP API.

The programs are Debian's `prometheus` package (`prometheus` and `promtool`), which
scripts/test.sh installs. The server runs with its own data folder, on 127.0.0.1 and a free
port, scraping the given targets and evaluating alerts/otel-loopguard.rules.yaml as shipped,
every second (the rule groups set no interval of their own, so the global one applies).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
import yaml

from live import ROOT, child_env, free_port, stop, tail, wait_until

RULES = ROOT / "alerts" / "otel-loopguard.rules.yaml"
UNIT_TESTS = ROOT / "tests" / "alerts" / "otel-loopguard.rules.test.yaml"
DASHBOARD = ROOT / "alerts" / "grafana-dashboard.json"
JOB = "otel-loopguard"  # the job name LoopguardReceiverDown assumes (docs/alerts.md)

_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def dashboard_exprs() -> list[str]:
    """Every query of the dashboard's panels, Grafana's variables ($job, $__range, ...) left in."""
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def program(name: str) -> str:
    """Path of `prometheus` or `promtool`; on CI (CI=true) a missing one fails, elsewhere it skips saying why."""
    found = shutil.which(name)
    if found:
        return found
    why = (f"{name} not found: the alert tests need Debian's prometheus package "
           "(apt-get install prometheus; bash scripts/test.sh installs it)")
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def promtool(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([program("promtool"), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, stdin=subprocess.DEVNULL)


@dataclass
class Prometheus:
    workdir: Path
    targets: list[str]
    rule_file: Path = RULES
    port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None

    @property
    def log(self) -> Path:
        return self.workdir / "prometheus.log"

    def start(self, timeout: float = 60) -> "Prometheus":
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(self.rule_file)],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": self.targets}]}],
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        command = [program("prometheus"), f"--config.file={path}",
                   f"--storage.tsdb.path={self.workdir / 'prometheus-data'}",
                   f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=info"]
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(command, cwd=self.workdir, env=child_env(), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._ready, timeout, "Prometheus never became ready", explain=lambda: tail(self.log))
        return self

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, f"Prometheus exited:\n{tail(self.log)}"
        try:
            with _HTTP.open(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the `data` of a successful answer (fails the test on an error answer)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with _HTTP.open(url, timeout=5) as response:
                body = json.load(response)
        except urllib.error.HTTPError as err:
            body = json.loads(err.read() or b"{}")
        assert body.get("status") == "success", f"{url}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        return data["result"] if data["resultType"] == "vector" else [{"metric": {}, "value": data["result"]}]

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert pending or firing now: labels, annotations, state."""
        return self.api("alerts")["alerts"]

    def rules(self) -> list[dict[str, Any]]:
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]

    def last_evaluation(self) -> float:
        """The oldest of the rule groups' last evaluation times (seconds since the epoch; 0 before the first)."""
        stamps = []
        for group in self.api("rules")["groups"]:
            match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$",
                             group.get("lastEvaluation", ""))
            if not match or match.group(1).startswith("0001-"):
                return 0.0
            zone = "+00:00" if match.group(3) == "Z" else match.group(3)
            stamps.append(datetime.fromisoformat(match.group(1) + zone).timestamp() + float(match.group(2) or 0))
        return min(stamps) if stamps else 0.0

    def stop(self) -> Optional[int]:
        return stop(self.proc) if self.proc is not None else None


@contextmanager
def running_prometheus(workdir: Path, targets: list[str]) -> Iterator[Prometheus]:
    server = Prometheus(workdir, targets)
    try:
        yield server.start()
    finally:
        server.stop()
