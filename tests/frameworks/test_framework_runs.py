"""Pydantic AI, Google ADK, CrewAI, smolagents and LlamaIndex driven for real under
`otel_loopguard.install()` (issue 30, observe-only).

Each run is the research script that made the framework's captures
(research/conventions/<fw>_run.py: the real framework, its scripted model, no network), in the
framework's own virtualenv (.venv-fw: Pydantic AI, CrewAI, smolagents, LlamaIndex; .venv-adk:
Google ADK, whose pins conflict; scripts/test.sh makes both), with FW_LOOPGUARD_KEY set so
that fw_common.setup() calls install() on the run's tracer provider. The spans the exporter
got are the processor's tagged copies; this module checks the tags, the processor's own
decisions (would_block at the loop's stop, nothing on a healthy run) and the audit of those
spans against the scenario's label (fw_labels.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from otel_loopguard.audit import audit
from otel_loopguard.otlp.json_format import request_to_json

from .fw_labels import ROOT, name_of, problems, request_of

KEY = "frameworks-runs-key-Hq2v9Tz0"
SCRIPTS = ROOT / "research" / "conventions"
VENVS = {"fw": ROOT / ".venv-fw" / "bin" / "python", "adk": ROOT / ".venv-adk" / "bin" / "python"}
# combo -> (virtualenv, script, instrumentation arguments); the combo names the captures'
COMBOS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "pai_otel_genai": ("fw", "pai_run.py", ("--instr", "genai")),
    "pai_openinference": ("fw", "pai_run.py", ("--instr", "openinference")),
    "adk_builtin": ("adk", "adk_run.py", ("--instr", "builtin")),
    "adk_openinference": ("adk", "adk_run.py", ("--instr", "openinference")),
    "crew_openinference": ("fw", "crew_run.py", ("--instr", "openinference")),
    "crew_openinference_events": ("fw", "crew_run.py", ("--instr", "openinference-events")),
    "smol_openinference": ("fw", "smol_run.py", ("--instr", "openinference")),
    "li_openinference": ("fw", "li_run.py", ("--instr", "openinference")),
    "li_traceloop": ("fw", "li_run.py", ("--instr", "traceloop")),
}
# A healthy run (the negative control) and a repeat; the other scenarios (errors, ping-pong,
# parallel batches, delegation) are judged on the captures (test_framework_captures.py), which
# the same scripts made: the run's cost, about 5 s each, counts against CI's 30 minutes.
SCENARIOS = ("healthy", "repeat")
# What the processor's own decisions must say: the fifth identical call would be blocked.
DECISION = {"repeat": ("would_block", "repeat", 5)}
# ADK + OpenInference writes one LLM span per agent run, ending after its calls: under
# install() the calls carry no turn, each is its own decision, and the loops are found (the
# same spans recorded without the processor are not: fw_labels.KNOWN_GAPS).

missing = sorted({v for v, _, _ in COMBOS.values() if not VENVS[v].exists()})
if missing:
    # On CI scripts/test.sh has made them: a missing one is a broken setup, not a skip.
    (pytest.fail if os.environ.get("CI") else pytest.skip)(f"{', '.join('.venv-' + m for m in missing)} not found: scripts/test.sh makes them "
                "(VENV=.venv-fw bash scripts/setup.sh frameworks_more; VENV=.venv-adk bash scripts/setup.sh adk)",
                **({"pytrace": False} if os.environ.get("CI") else {"allow_module_level": True}))


def _env(out: Path) -> dict[str, str]:
    """No OTel, loop guard, provider or instrumentation setting leaks in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OPENAI_", "TRACELOOP_", "OPENINFERENCE_", "PYTHON", "GOOGLE_", "FW_"))}
    return {**env, "FW_CAPTURES": str(out), "FW_LOOPGUARD_KEY": KEY, "CREWAI_DISABLE_TELEMETRY": "true"}


def _run(combo: str, scenario: str, out: Path) -> Path:
    venv, script, instr = COMBOS[combo]
    name = f"{combo}__{scenario}"
    proc = subprocess.run([str(VENVS[venv]), str(SCRIPTS / script), *instr, "--scenario", scenario, "--out", name],
                          cwd=ROOT, env=_env(out), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    return out / f"{name}.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Path]]:
    """Every combo and scenario once, two at a time (each a fresh interpreter)."""
    out = tmp_path_factory.mktemp("framework_runs")
    pairs = [(c, s) for c in COMBOS for s in SCENARIOS]
    with ThreadPoolExecutor(2) as pool:
        futures = {p: pool.submit(_run, *p, out) for p in pairs}
        yield {p: f.result() for p, f in futures.items()}


ALL = [(c, s) for c in COMBOS for s in SCENARIOS]
IDS = [f"{c}-{s}" for c, s in ALL]


def _doc(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _tagged(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((s for s in doc["spans"] if "loopguard.tool.name" in s["attributes"]),
                  key=lambda s: s["attributes"]["loopguard.seq"])


def _decisions(span: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["attributes"] for e in span["events"] if e["name"] == "loopguard.decision"]


@pytest.mark.parametrize(("combo", "scenario"), ALL, ids=IDS)
def test_install_tags_every_tool_call_of_the_run(runs: dict[tuple[str, str], Path], combo: str,
                                                 scenario: str) -> None:
    doc = _doc(runs[combo, scenario])
    tagged = _tagged(doc)
    label = doc["meta"]["expected"]
    assert len(tagged) == label["tool_calls"]
    tags = [s["attributes"] for s in tagged]
    assert [t["loopguard.seq"] for t in tags] == list(range(1, len(tags) + 1))
    assert {t["loopguard.mode"] for t in tags} == {"observe"}
    assert {t["loopguard.run.id"] for t in tags} == {tagged[0]["trace_id"]}
    assert all(len(t["loopguard.args.digest"]) == 32 for t in tags)
    assert [t["loopguard.outcome"] for t in tags].count("error") == label["errors"]
    # smolagents' final answer is a call of its own (FinalAnswerTool), after the scripted ones
    digests = [t["loopguard.args.digest"] for t in tags][:label["tool_calls"] - combo.startswith("smol")]
    if scenario == "repeat":  # five identical calls: one action
        assert len(set(digests)) == 1
    if scenario == "healthy":  # three different calls; ADK's built-in spans carry no arguments by default
        assert len(set(digests)) == (2 if combo == "adk_builtin" else 3)


@pytest.mark.parametrize(("combo", "scenario"), ALL, ids=IDS)
def test_the_processor_would_block_the_loop_and_nothing_in_a_healthy_run(
        runs: dict[tuple[str, str], Path], combo: str, scenario: str) -> None:
    tagged = _tagged(_doc(runs[combo, scenario]))
    decisions = [(d["loopguard.decision"], d["loopguard.finding.kind"], s["attributes"]["loopguard.seq"])
                 for s in tagged for d in _decisions(s)]
    if scenario == "healthy":
        assert decisions == []
        return
    verb, kind, seq = DECISION[scenario]
    assert next(d for d in decisions if d[0] == verb) == (verb, kind, seq)


@pytest.mark.parametrize(("combo", "scenario"), ALL, ids=IDS)
def test_the_audit_of_the_tagged_spans_finds_what_the_label_says(
        runs: dict[tuple[str, str], Path], combo: str, scenario: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)
    path = runs[combo, scenario]
    out = tmp_path / "run.otlp.json"
    out.write_text(json.dumps(request_to_json(request_of(path))) + "\n")
    reports = audit([out])
    calls = [c for r in reports for c in r.calls]
    names = [name_of(f.kind, f.severity, f.tool) for r in reports for f in r.findings]
    label = _doc(path)["meta"]["expected"]
    assert problems(label, len(calls), sum(1 for c in calls if c.ok is False), names) == []
