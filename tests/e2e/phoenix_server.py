"""A real Arize Phoenix server for end-to-end tests: started on loopback, read through its REST API.

`phoenix serve` runs in its own process group, with its working directory (embedded SQLite) in
a temp dir, telemetry and external resources off, and its OTLP/gRPC port kept on loopback by
`_phoenix_loopback.py`. Used by tests/e2e/test_phoenix.py and tests/collector/test_pipelines.py.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from live import child_env, free_port, stop, tail

HERE = Path(__file__).resolve().parent
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy


def phoenix_installed() -> bool:
    """`phoenix` importable, with the server (not only the arize-phoenix-client part of the namespace)."""
    spec = importlib.util.find_spec("phoenix")
    return spec is not None and any(Path(p, "server", "main.py").is_file() for p in spec.submodule_search_locations or ())


@dataclass
class Phoenix:
    proc: subprocess.Popen
    http_port: int
    grpc_port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"phoenix exited with {self.proc.returncode}:\n{tail(self.log)}"
            try:
                with _HTTP.open(f"{self.url}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.25)
        raise AssertionError(f"phoenix not healthy after {timeout:.0f} s:\n{tail(self.log)}")

    def spans(self, project: str, trace_id: str) -> list[dict[str, Any]]:
        """GET /v1/projects/{project}/spans?trace_id=...: every span Phoenix stored for the trace."""
        query = urllib.parse.urlencode({"trace_id": trace_id, "limit": 1000})
        try:
            with _HTTP.open(f"{self.url}/v1/projects/{urllib.parse.quote(project)}/spans?{query}", timeout=5) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            if e.code == 404:  # the project does not exist (yet)
                return []
            raise
        assert body.get("next_cursor") is None, "more than one page of spans for one small trace"
        return list(body["data"])

    def filtered(self, project: str, condition: Optional[str], trace_condition: Optional[str] = None) -> list[tuple[str, str]]:
        """(trace id, span name) of the spans Phoenix's own filters select, as its UI asks for them
        (GraphQL `spans(filterCondition, traceFilterCondition)`): what docs/deployment.md tells users to type."""
        query = ("query($c: String, $t: String) { projects { edges { node { name spans(first: 1000, "
                 "filterCondition: $c, traceFilterCondition: $t) { edges { node { name context { traceId } } } } } } } }")
        body = json.dumps({"query": query, "variables": {"c": condition, "t": trace_condition}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"})
        with _HTTP.open(request, timeout=10) as r:
            reply = json.load(r)
        assert "errors" not in reply, reply["errors"]
        return [(e["node"]["context"]["traceId"], e["node"]["name"])
                for p in reply["data"]["projects"]["edges"] if p["node"]["name"] == project
                for e in p["node"]["spans"]["edges"]]

    def trace_annotations(self, project: str, trace_ids: list[str]) -> list[dict[str, Any]]:
        """GET /v1/projects/{project}/trace_annotations?trace_ids=...: the traces' annotations."""
        return self._annotations(project, "trace", trace_ids)

    def span_annotations(self, project: str, span_ids: list[str]) -> list[dict[str, Any]]:
        """GET /v1/projects/{project}/span_annotations?span_ids=...: the spans' annotations."""
        return self._annotations(project, "span", span_ids)

    def span_labelled(self, project: str, trace_id: str, prefix: str) -> bool:
        """Whether a span of the trace holds an annotation whose label starts with `prefix`. The
        receiver posts span annotations apart from the trace's: they may land later."""
        ids = [s["context"]["span_id"] for s in self.spans(project, trace_id)]
        return bool(ids) and any(str(a["result"].get("label", "")).startswith(prefix)
                                 for a in self.span_annotations(project, ids))

    def _annotations(self, project: str, kind: str, ids: list[str]) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode([(f"{kind}_ids", i) for i in ids] + [("limit", 1000)])
        url = f"{self.url}/v1/projects/{urllib.parse.quote(project)}/{kind}_annotations?{query}"
        try:
            with _HTTP.open(url, timeout=5) as r:
                return list(json.load(r)["data"])
        except urllib.error.HTTPError as e:
            if e.code == 404:  # the project or the traces do not exist (yet)
                return []
            raise



@contextmanager
def running_phoenix(tmp_path: Path) -> Iterator[Phoenix]:
    workdir = tmp_path / "phoenix"
    workdir.mkdir()
    http_port, grpc_port = free_port(), free_port()
    env = child_env(lambda k: k.startswith(("PHOENIX_", "OTEL_")))
    env.update(
        PHOENIX_WORKING_DIR=str(workdir),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(http_port),
        PHOENIX_GRPC_PORT=str(grpc_port),
        PHOENIX_TELEMETRY_ENABLED="false",  # no FullStory / Scarf pixels
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",  # no WASM sandbox download, no docs MCP server
    )
    log = tmp_path / "phoenix.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, str(HERE / "_phoenix_loopback.py"), "serve"], cwd=workdir, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield Phoenix(proc, http_port, grpc_port, log)
    finally:
        stop(proc, group=True)
