"""The Phoenix annotations, apart from Phoenix: which spans become which annotations, one
verdict per loop, and a refusal that is logged without the API key. Against the real Phoenix: tests/e2e/test_phoenix.py."""

from __future__ import annotations

import http.server
import json
import logging
import threading
from dataclasses import replace
from typing import Any, Iterator

import pytest

from otel_loopguard.findings import finding
from otel_loopguard.findings.otlp import finding_span, place_at, run_span
from otel_loopguard.receiver.ops.metrics import Metrics
from otel_loopguard.receiver.out.phoenix import (MAX_CALL_NOTES, SPAN_ROUTE, TRACE_ROUTE, PhoenixAnnotator, Verdicts,
                                                 annotation, call_annotations)

WHERE = place_at(b"\x01" * 16, b"\x02" * 8, 10, 20)
TRACE = "01" * 16
ROOT = "02" * 8
REASON = "lookup_order was called 5 times in a row"


def _ids(n: int) -> tuple[str, ...]:
    return tuple(f"{k:016x}" for k in range(1, n + 1))


def _finding(severity: str, kind: str = "repeat", calls: int = 5, where: Any = WHERE) -> Any:
    f = finding(kind, severity, [], REASON, tool="lookup_order")
    f = replace(f, seqs=tuple(range(1, calls + 1)), span_ids=_ids(calls), first_seq=1, last_seq=calls, count=calls)
    return finding_span(f.stamped("run-1", "v1"), [], where)


def test_the_trace_annotation_says_verdict_kind_tool_and_count_with_a_score() -> None:
    span = _finding("stop")
    body = annotation(span)
    assert body is not None
    assert (body["name"], body["annotator_kind"], body["trace_id"]) == ("loopguard", "CODE", TRACE)
    assert body["result"] == {"label": "stop: repeat lookup_order x5", "score": 5.0,
                              # The stop's reason ends with enforce mode's next step (issue 29).
                              "explanation": f"{REASON}; enforce mode would deny call 5: see docs/guard.md"
                                             f" (finding span {span.span_id.hex()})"}
    assert body["metadata"]["finding.kind"] == "repeat" and body["metadata"]["run.id"] == "run-1"
    assert body["metadata"]["finding.span_id"] == span.span_id.hex()
    assert "identifier" not in body  # one per trace: a later verdict replaces it
    assert annotation(_finding("warn", calls=3))["result"]["label"] == "warn: repeat lookup_order x3"  # type: ignore[index]
    # Negative controls: an info finding, and a run summary whose release rule fails (status ERROR too).
    assert annotation(_finding("info")) is None
    failing = run_span("run-1", WHERE, {"release": {"passed": False, "violations": ["uncontained_loop: x"]}},
                       {"loopguard.run.outcome": "scored"})
    assert failing.status.code == failing.status.STATUS_CODE_ERROR and annotation(failing) is None
    assert Verdicts().notes(failing) == []


def test_the_calls_say_their_place_and_the_denied_one_says_so() -> None:
    notes = call_annotations(_finding("stop"))
    assert [n["span_id"] for n in notes] == list(_ids(5))
    assert [n["result"]["label"] for n in notes] == ["repeat 1/5", "repeat 2/5", "repeat 3/5", "repeat 4/5",
                                                     "would deny: repeat 5/5"]
    assert [n["result"]["label"] for n in call_annotations(_finding("warn", calls=3))][-1] == "would warn: repeat 3/3"
    # A long finding: only the last calls, the denied one included.
    many = call_annotations(_finding("stop", "tool_cap", calls=MAX_CALL_NOTES + 7))
    assert len(many) == MAX_CALL_NOTES and many[-1]["result"]["label"].startswith("would deny: tool_cap")
    assert many[0]["span_id"] == _ids(MAX_CALL_NOTES + 7)[7]


def test_one_loop_is_one_verdict_a_stop_replaces_its_warn_and_nothing_else_does() -> None:
    verdicts = Verdicts()
    warn = verdicts.notes(_finding("warn", calls=3))
    assert [(route, n["result"]["label"]) for route, n in warn] == [
        (SPAN_ROUTE, "repeat 1/3"), (SPAN_ROUTE, "repeat 2/3"), (SPAN_ROUTE, "would warn: repeat 3/3"),
        (TRACE_ROUTE, "warn: repeat lookup_order x3"), (SPAN_ROUTE, "warn: repeat lookup_order x3")]
    root = warn[-1][1]
    assert root["span_id"] == ROOT and "score" not in root["result"]  # a score would hide the label in the list
    stop = verdicts.notes(_finding("stop"))
    assert [n["result"]["label"] for _, n in stop][-3:] == ["would deny: repeat 5/5", "stop: repeat lookup_order x5",
                                                            "stop: repeat lookup_order x5"]
    # The same loop seen by another detector, a later warn, the same stop again: nothing more.
    assert verdicts.notes(_finding("stop", "no_progress", calls=6)) == []
    assert verdicts.notes(_finding("warn", calls=3)) == [] and verdicts.notes(_finding("stop")) == []
    # Mutation: another trace is judged on its own.
    other = place_at(b"\x03" * 16, b"\x04" * 8, 10, 20)
    assert len(verdicts.notes(_finding("stop", where=other))) == 5 + 2


class _Refusing(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers["Content-Length"])
        _Refusing.seen.append({"auth": self.headers.get("Authorization"), "path": self.path,
                               "body": json.loads(self.rfile.read(length))})
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
    # The stop's five calls and root span, then its trace; the warn after it adds nothing.
    assert [(s["path"], len(s["body"]["data"])) for s in _Refusing.seen] == [(SPAN_ROUTE, 6), (TRACE_ROUTE, 1)]
    assert {s["auth"] for s in _Refusing.seen} == {f"Bearer {secret}"}
    assert metrics.get("phoenix_annotations_dropped_total") == 7 and metrics.get("phoenix_annotations_total") == 0
    assert "HTTP 401" in caplog.text and secret not in caplog.text
