"""The proxy's spans judged downstream like any tool span: by `otel-loopguard serve` and by
`otel-loopguard audit` (the run is the MCP session)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from harness import HERE, KEY, ROOT, Sink
from test_proxy import HEALTHY, REPEAT, calls, wait_for

sys.path.insert(0, str(HERE.parent))
from live import ReceiverProcess, child_env  # noqa: E402

pytest.importorskip("mcp")


def _loud(findings: list[Any], run_id: str) -> set[str]:
    return {f.attributes["loopguard.finding.kind"] for f in findings
            if f.attributes.get("loopguard.run.id") == run_id and f.attributes.get("loopguard.finding.severity") in ("warn", "stop")}


def test_the_receiver_finds_the_repeat_and_nothing_in_the_healthy_session(tmp_path: Path, sink: Sink) -> None:
    receiver = ReceiverProcess(args=["--forward", f"127.0.0.1:{sink.port}"], env=child_env(OTEL_LOOPGUARD_KEY=KEY),
                               logdir=tmp_path).start()
    try:
        at = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receiver.address}"}
        (tmp_path / "healthy").mkdir()
        (tmp_path / "repeat").mkdir()
        calls(tmp_path / "healthy", "observe", sink, HEALTHY, **at)
        calls(tmp_path / "repeat", "observe", sink, REPEAT, **at)
        spans = wait_for(lambda: len(sink.tool_spans()) == 9 and sink.tool_spans(), "9 forwarded tool spans")
        healthy, repeat = spans[0].attributes["mcp.session.id"], spans[-1].attributes["mcp.session.id"]
        assert healthy != repeat
        wait_for(lambda: "repeat" in _loud(sink.findings(), repeat), "the receiver's repeat finding")
        assert _loud(sink.findings(), healthy) == set()
    finally:
        receiver.stop()


def test_audit_judges_the_recorded_sessions(tmp_path: Path, sink: Sink, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    (tmp_path / "healthy").mkdir()
    (tmp_path / "repeat").mkdir()
    calls(tmp_path / "healthy", "observe", sink, HEALTHY)
    calls(tmp_path / "repeat", "observe", sink, REPEAT)
    wait_for(lambda: len(sink.tool_spans()) == 9, "9 tool spans")
    files = []
    for n, request in enumerate(sink.requests):
        files.append(tmp_path / f"{n}.pb")
        files[-1].write_bytes(request)
    from otel_loopguard.audit import audit

    reports = {r.run_id: r for r in audit(files, None)}
    assert len(reports) == 2
    by_calls = {len(r.calls): r for r in reports.values()}
    assert {f"{f.kind}/{f.severity}" for f in by_calls[5].findings} >= {"repeat/stop"}
    assert [f for f in by_calls[4].findings if f.severity in ("warn", "stop")] == []
