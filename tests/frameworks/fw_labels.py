"""The issue-30 framework captures and their labels (research/conventions/fw_captures/).

Each capture's meta carries `expected`, written by its run script before any audit: the tool
calls and failed calls a correct product counts, the findings it must raise (`kind/severity`
or `kind/severity tool`), and whether the run must stay quiet (no warn or stop at all).
`problems()` says how a verdict falls short of it; the tests in this folder judge the
captures (test_framework_captures.py) and live runs (test_framework_runs.py) with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "research" / "conventions" / "fw_captures"
sys.path.insert(0, str(ROOT / "scripts"))
import captures_to_otlp  # noqa: E402

# What today's product does not do as labelled, by capture, and why (docs/frameworks.md). The
# tests expect these to fail (strict: a capture that starts passing must leave this list).
KNOWN_GAPS: dict[str, str] = {
    **{f"crew_traceloop__{s}": "OpenLLMetry's CrewAI instrumentation writes three spans a run (workflow, task, "
                                "agent), no tool span and no model span, on the llm-openai path too (it wraps only "
                                "crewai.llm.LLM.call): no call, requested or run, to judge (FINDINGS 8.11)"
       for s in ("healthy", "repeat", "pingpong", "errors", "parallel", "delegate", "llm-openai__healthy",
                 "llm-openai__repeat", "llm-openai__pingpong", "llm-openai__errors", "llm-openai__parallel")},
    **{name: "CrewAI's OpenInference wrappers write no model span, and CrewAI runs a batch's calls one after "
             "another (no overlap; 0.4-0.6 ms apart, the next turn 11-18 ms later): nothing in the spans tells a "
             "batch from consecutive calls; a model span would (OpenInference's LiteLLM/OpenAI instrumentor, or "
             "the event listener, whose captures pass)"
       for name in ("crew_openinference__parallel", "crew_openinference__llm-openai__parallel")},
}

# A delegation read from the span tree: a smolagents managed agent runs as an AGENT span, no tool
# span; the audit (otlp/delegations.py), install() (processor/delegations.py) and the receiver
# (its run's bounded span tree, receiver/runs/buffer.py) count it as a call when its manager's
# agent span lists it. Every reader judges these captures as labelled.
RECEIVER_GAPS: dict[str, str] = {}

# What the audit of install()'s export (the processor's sequence, turns and digests: fw_replay.py)
# does not judge as labelled, and why. The processor numbers a call when its span ends, from
# what it has seen by then.
INSTALL_GAPS: dict[str, str] = {
    **KNOWN_GAPS,
}


def captures() -> list[Path]:
    return sorted(CAPTURES.glob("*.json"))


def request_of(capture: Path) -> ExportTraceServiceRequest:
    spans = [captures_to_otlp.to_span(s) for s in json.loads(capture.read_text(encoding="utf-8"))["spans"]]
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])


def expected(capture: Path) -> dict[str, Any]:
    return json.loads(capture.read_text(encoding="utf-8"))["meta"]["expected"]


def name_of(kind: str, severity: str, tool: str | None) -> str:
    return f"{kind}/{severity}" + (f" {tool}" if tool else "")


def problems(label: dict[str, Any], calls: int, errors: int, findings: Iterable[str]) -> list[str]:
    """How a verdict (calls counted, failed calls, finding names) falls short of the label."""
    names = list(findings)
    out = []
    if calls != label["tool_calls"]:
        out.append(f"{calls} calls, not {label['tool_calls']}")
    if errors != label.get("errors", errors):
        out.append(f"{errors} failed calls, not {label['errors']}")
    for must in label.get("must", []):
        # "kind/severity" matches any tool; "kind/severity tool" that tool only
        if not any(n == must or (" " not in must and n.split(" ")[0] == must) for n in names):
            out.append(f"no {must}")
    if label.get("quiet"):
        out += [f"unwanted {n}" for n in names if "/warn" in n or "/stop" in n]
    return out


def read_spans(path: Path) -> list[dict[str, Any]]:
    """The spans of an OTLP protobuf file, in start order: name, ids, attributes, events."""
    from otel_loopguard.otlp.values import attributes

    req = ExportTraceServiceRequest.FromString(path.read_bytes())
    spans = [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return [{"name": s.name, "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(), "start": s.start_time_unix_nano,
             "attributes": attributes(s.attributes),
             "events": [(e.name, attributes(e.attributes)) for e in s.events]}
            for s in sorted(spans, key=lambda s: s.start_time_unix_nano)]


def run_driver(python: Path, script: Path, scenario: str, out: Path, timeout: int,
               extra: Iterable[str] = ()) -> dict[str, Any]:
    """An enforce driver run in its framework's virtualenv on this checkout's otel_loopguard
    (whatever the virtualenv's editable install says), with no OTel, provider or Python setting
    leaking in: its JSON report, and the spans it exported to `out`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "GOOGLE_", "PYTHON", "HF_"))}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([str(python), str(script), scenario, str(out), *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{script.name} {scenario}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    result = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return {**result, "spans": read_spans(out)}
