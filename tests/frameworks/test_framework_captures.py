"""Pydantic AI, Google ADK, CrewAI, smolagents and LlamaIndex as captured (issue 30): the
audit, the receiver and install() (the capture replayed through the processor, its export
audited) judge each capture in research/conventions/fw_captures/ as its label says
(fw_labels.py): the loops found, the healthy runs, single handoffs and parallel batches quiet.
The captures the product does not handle yet are listed in fw_labels.KNOWN_GAPS (all three),
RECEIVER_GAPS (the receiver only) and INSTALL_GAPS (install() only) and expected to fail
(strict), so the lists stay true.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from otel_loopguard.audit import audit
from otel_loopguard.otlp.json_format import request_to_json

from receiver.harness import ReceiverThread, Sink, attr, export_stub, make_config, wait_for
from .fw_replay import replay
from .fw_labels import INSTALL_GAPS, KNOWN_GAPS, RECEIVER_GAPS, captures, expected, name_of, problems, request_of

KEY = "frameworks-capture-key-5mQx81Lz"
CAPTURES = captures()


def _param(path: Path, gaps: dict[str, str] = KNOWN_GAPS) -> Any:
    gap = gaps.get(path.stem)
    marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)


def test_every_capture_is_labelled_and_every_gap_names_a_capture() -> None:
    assert len(CAPTURES) >= 118
    assert all("tool_calls" in expected(p) for p in CAPTURES)
    assert set(KNOWN_GAPS) | set(RECEIVER_GAPS) <= {p.stem for p in CAPTURES}
    assert not set(KNOWN_GAPS) & set(RECEIVER_GAPS)
    assert set(KNOWN_GAPS) | set(RECEIVER_GAPS) | set(INSTALL_GAPS) <= {p.stem for p in CAPTURES}


def _audit(path: Path, tmp_path: Path, installed: bool = False) -> list[str]:
    out = tmp_path / f"{path.stem}.otlp.json"
    if installed:
        replay(path, out, KEY)
    else:
        out.write_text(__import__("json").dumps(request_to_json(request_of(path))) + "\n", encoding="utf-8")
    reports = audit([out])
    calls = [c for r in reports for c in r.calls]
    names = [name_of(f.kind, f.severity, f.tool) for r in reports for f in r.findings]
    return problems(expected(path), len(calls), sum(1 for c in calls if c.ok is False), names)


@pytest.mark.parametrize("path", [_param(p) for p in CAPTURES])
def test_the_audit_judges_each_capture_as_labelled(path: Path, tmp_path: Path) -> None:
    assert _audit(path, tmp_path) == []


@pytest.mark.parametrize("path", [_param(p, INSTALL_GAPS) for p in CAPTURES])
def test_install_then_the_audit_judges_each_capture_as_labelled(path: Path, tmp_path: Path) -> None:
    """The capture's spans replayed through install() on a real TracerProvider (fw_replay.py),
    its tagged export audited: the processor's turns, sequence and digests judged."""
    assert _audit(path, tmp_path, installed=True) == []


def test_mutation_a_repeat_cut_to_four_calls_is_not_stopped(tmp_path: Path) -> None:
    """The stop comes from the fifth identical call: without it no repeat stop is raised."""
    import json

    path = CAPTURES[0].parent / "pai_otel_genai__repeat.json"
    doc = json.loads(path.read_text())
    tools = [s for s in doc["spans"] if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
    doc["spans"] = [s for s in doc["spans"] if s is not tools[-1]]
    doc["meta"]["expected"] = dict(doc["meta"]["expected"], tool_calls=4)
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(doc))
    assert _audit(cut, tmp_path) == ["no repeat/stop lookup_order"]


# -- the receiver: every capture through one real receiver ---------------------------------

@pytest.fixture(scope="module")
def judged() -> Iterator[dict[str, tuple[int, list[str]]]]:
    """capture -> (calls, finding names) as the receiver judged it (its run summary counts no
    failed calls; the error streaks say whether it saw them): every capture
    sent to one real receiver (gRPC), each its own trace; a capture with no call has no run."""
    os.environ.setdefault("OTEL_LOOPGUARD_KEY", KEY)
    sink = Sink()
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=0.3, gap_wait_seconds=30.0))
    try:
        traces = {}
        channel, stub = export_stub(receiver.port)
        with channel:
            for path in CAPTURES:
                request = request_of(path)
                spans = request.resource_spans[0].scope_spans[0].spans
                traces[path.stem] = {s.trace_id.hex() for s in spans}
                stub.Export(request, timeout=10)
        with_calls = sum(1 for p in CAPTURES if expected(p)["tool_calls"] and not p.stem.startswith("crew_traceloop"))
        wait_for(lambda: len(sink.runs()) >= with_calls, timeout=60, what="a run summary for every capture")
        yield {stem: _verdict(sink, ids) for stem, ids in traces.items()}
    finally:
        receiver.stop()
        sink.stop()


def _verdict(sink: Sink, trace_ids: set[str]) -> tuple[int, list[str]]:
    runs = [s for s in sink.runs() if attr(s, "loopguard.run.id") in trace_ids]
    calls = sum(attr(s, "loopguard.score.tool_calls") or 0 for s in runs)
    names = [name_of(attr(f, "loopguard.finding.kind"), attr(f, "loopguard.finding.severity"),
                     attr(f, "loopguard.tool.name")) for f in sink.findings()
             if attr(f, "loopguard.run.id") in trace_ids]
    return calls, names


@pytest.mark.parametrize("path", [_param(p, {**KNOWN_GAPS, **RECEIVER_GAPS}) for p in CAPTURES])
def test_the_receiver_judges_each_capture_as_labelled(path: Path, judged: dict[str, Any]) -> None:
    calls, names = judged[path.stem]
    label = expected(path)
    assert problems(label, calls, label.get("errors", 0), names) == []
