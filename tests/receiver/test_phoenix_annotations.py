"""The opt-in Phoenix trace annotations, apart from Phoenix: which spans become one, and a
refusal that is logged without the API key. Against the real Phoenix: tests/e2e/test_phoenix.py."""

from __future__ import annotations

import http.server
import json
import logging
import threading
from typing import Any, Iterator

import pytest

from otel_loopguard.findings import finding
from otel_loopguard.findings.otlp import finding_span, place_at, run_span
from otel_loopguard.receiver.ops.metrics import Metrics
from otel_loopguard.receiver.out.phoenix import PhoenixAnnotator, annotation

WHERE = place_at(b"\x01" * 16, b"\x02" * 8, 10, 20)


def _finding(severity: str) -> Any:
    f = finding("repeat", severity, [], "lookup_order was called 5 times in a row", tool="lookup_order")
    return finding_span(f.stamped("run-1", "v1"), [], WHERE)


def test_only_stop_findings_become_annotations() -> None:
    body = annotation(_finding("stop"))
    assert body is not None
    assert (body["name"], body["annotator_kind"], body["trace_id"]) == ("loopguard", "CODE", "01" * 16)
    assert body["result"] == {"label": "stop", "explanation": "lookup_order was called 5 times in a row"}
    assert body["metadata"]["finding.kind"] == "repeat" and body["metadata"]["run.id"] == "run-1"
    # Negative controls: a warn, and a run summary whose release rule fails (status ERROR too).
    assert annotation(_finding("warn")) is None
    failing = run_span("run-1", WHERE, {"release": {"passed": False, "violations": ["uncontained_loop: x"]}},
                       {"loopguard.run.outcome": "scored"})
    assert failing.status.code == failing.status.STATUS_CODE_ERROR and annotation(failing) is None


class _Refusing(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers["Content-Length"])
        _Refusing.seen.append({"auth": self.headers.get("Authorization"), "body": json.loads(self.rfile.read(length))})
        self.send_response(401)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refusing() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_refusal_is_logged_and_counted_never_with_the_key(refusing: str, caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    secret = "px-" + "s" * 40
    metrics = Metrics()

    async def scenario() -> None:
        annotator = PhoenixAnnotator(refusing, secret, metrics)
        annotator.start()
        annotator.offer([_finding("stop"), _finding("warn")])
        await annotator.drain(5)
        await annotator.stop()

    with caplog.at_level(logging.INFO, logger="otel_loopguard.receiver"):
        asyncio.run(scenario())
    assert [len(s["body"]["data"]) for s in _Refusing.seen] == [1]
    assert _Refusing.seen[0]["auth"] == f"Bearer {secret}"
    assert metrics.get("phoenix_annotations_dropped_total") == 1 and metrics.get("phoenix_annotations_total") == 0
    assert "HTTP 401" in caplog.text and secret not in caplog.text
