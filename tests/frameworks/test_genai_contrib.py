"""The fifth instrumentation of the matrix: the OTel-contrib GenAI instrumentation of the
OpenAI Agents SDK (`opentelemetry-instrumentation-openai-agents-v2`).

It installs the same module files as OpenLLMetry's instrumentation, so it runs in its own
virtualenv (.venv-genai): each scenario is one run of genai_contrib_agent.py there, which
writes the finished spans as OTLP protobuf. This module reads them back in the main
virtualenv and checks the processor's tags, the guard's decisions and the audit's score.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from .genai_contrib_agent import KEY, SCENARIOS

ROOT = Path(__file__).resolve().parents[2]
GENAI_PYTHON = ROOT / ".venv-genai" / "bin" / "python"
SCRIPT = Path(__file__).resolve().with_name("genai_contrib_agent.py")
DENIED_PREFIX = "Not executed: loop guard"
NUDGE_PREFIX = "[loop guard]"

if not GENAI_PYTHON.exists():
    pytest.skip(f"{GENAI_PYTHON.relative_to(ROOT)} not found: create it with "
                "`VENV=.venv-genai bash scripts/setup.sh genai_contrib` (scripts/test.sh does)",
                allow_module_level=True)

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.proto.common.v1.common_pb2 import AnyValue  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan  # noqa: E402


@dataclass
class Span:
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_id: str
    start: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]


@dataclass
class Run:
    path: Path  # the OTLP protobuf file
    invoked: list[tuple[str, dict[str, Any]]]
    final_output: str
    requests: int
    tool_outputs: list[str]
    spans: list[Span]  # in start order

    def tool_spans(self) -> list[Span]:
        return [s for s in self.spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]

    def bodies(self) -> list[Span]:
        return [s for s in self.spans if s.name.endswith(".body")]


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


def _read(path: Path) -> list[Span]:
    req = ExportTraceServiceRequest()
    req.ParseFromString(path.read_bytes())
    out = []
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(Span(
                    s.name, s.kind, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.start_time_unix_nano,
                    {kv.key: _value(kv.value) for kv in s.attributes},
                    [(e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in s.events]))
    return sorted(out, key=lambda s: s.start)


def _child_env() -> dict[str, str]:
    """No OTel, loop guard or Agents SDK setting leaks in; nothing could reach OpenAI."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OPENAI_", "TRACELOOP_", "PYTHON"))}
    env["OPENAI_API_KEY"] = "sk-dummy-no-network"
    return env


def _run(scenario: str, out: Path) -> Run:
    proc = subprocess.run([str(GENAI_PYTHON), str(SCRIPT), scenario, str(out)], cwd=ROOT, env=_child_env(),
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"{scenario}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    result = json.loads(line)
    return Run(out, [(t, a) for t, a in result["invoked"]], result["final_output"], result["requests"],
               result["tool_outputs"], _read(out))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """All three scenarios, run once and side by side (each is a fresh interpreter, ~3 s)."""
    folder = tmp_path_factory.mktemp("genai_contrib")
    with ThreadPoolExecutor(len(SCENARIOS)) as pool:
        futures = {s: pool.submit(_run, s, folder / f"{s}.pb") for s in SCENARIOS}
        yield {s: f.result() for s, f in futures.items()}


def guard_events(span: Span, decision: Optional[str] = None) -> list[dict[str, Any]]:
    """The guard's `loopguard.decision` events (the processor's carry no `loopguard.dispatched`)."""
    out = [a for n, a in span.events if n == "loopguard.decision" and "loopguard.dispatched" in a]
    return [e for e in out if decision is None or e["loopguard.decision"] == decision]


def processor_events(span: Span, decision: Optional[str] = None) -> list[dict[str, Any]]:
    out = [a for n, a in span.events if n == "loopguard.decision" and "loopguard.dispatched" not in a]
    return [e for e in out if decision is None or e["loopguard.decision"] == decision]


def _denied(outputs: list[str]) -> list[int]:
    return [i for i, out in enumerate(outputs, start=1) if out.startswith(DENIED_PREFIX)]


# -- the contract tags -----------------------------------------------------------------------

@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tool_spans_carry_the_contract_tags(runs: dict[str, Run], scenario: str) -> None:
    from otel_loopguard.canon import load_key

    run = runs[scenario]
    spans = run.tool_spans()
    assert len(spans) == 8
    tags = [s.attributes for s in spans]
    tool = "search_cases" if scenario == "pagination" else "lookup_order"
    assert [t["loopguard.seq"] for t in tags] == list(range(1, 9))
    assert {t["loopguard.tool.name"] for t in tags} == {t["gen_ai.tool.name"] for t in tags} == {tool}
    digests = [t["loopguard.args.digest"] for t in tags]
    # Equal calls, equal digests; every page has its own cursor, so its own digest.
    assert len(set(digests)) == (8 if scenario == "pagination" else 1)
    assert {t["loopguard.key.id"] for t in tags} == {load_key(env={}, key=KEY).key_id}
    # install() observes; a run an enforcing guard judged says enforce (docs/guard.md, "Mode")
    assert {t["loopguard.mode"] for t in tags} == {"observe" if scenario == "observe" else "enforce"}
    assert {t["loopguard.run.id"] for t in tags} == {spans[0].trace_id}
    # One call per model response: turns come from the `text_completion` model spans.
    # Spans of denied calls are numbered but carry no turn (tagger._denied).
    ran = [i for i, t in enumerate(tags, start=1) if t.get("loopguard.dispatched") is not False]
    assert [tags[i - 1]["loopguard.turn"] for i in ran] == ran


def test_the_v2_spans_are_shaped_as_captured(runs: dict[str, Run]) -> None:
    # The model span of a scripted model (no input messages) is `text_completion`, not `chat`;
    # the processor must still count it as a model turn (loopguard.turn above depends on it).
    # Model and tool spans are siblings under the SDK's per-turn span (`unknown`).
    run = runs["observe"]
    by_id = {s.span_id: s for s in run.spans}
    models = [s for s in run.spans if s.attributes.get("gen_ai.operation.name") == "text_completion"]
    assert len(models) == 9 and {s.name for s in models} == {"text_completion scripted-model"}
    assert {s.kind for s in models} == {PbSpan.SPAN_KIND_CLIENT}
    assert all(s.attributes["gen_ai.usage.input_tokens"] == 100 for s in models)
    assert not [s for s in run.spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    tools = run.tool_spans()
    assert {s.name for s in tools} == {"execute_tool lookup_order"} and {s.kind for s in tools} == {
        PbSpan.SPAN_KIND_INTERNAL}
    assert all(s.attributes["gen_ai.tool.call.arguments"] == '{"order_id": "A12"}' for s in tools)
    assert "gen_ai.tool.call.id" not in tools[0].attributes  # the v2 bridge records no call id
    for tool in tools:
        turn = by_id[tool.parent_id]
        assert turn.name == "unknown"
        assert [m for m in models if m.parent_id == turn.span_id]
    # Without the guard every body ran inside its tool span.
    assert {b.parent_id for b in run.bodies()} == {s.span_id for s in tools}


# -- observe: install() alone ------------------------------------------------------------------

def test_observe_reports_would_block_at_the_fifth_call_and_the_loop_runs(runs: dict[str, Run]) -> None:
    run = runs["observe"]
    assert run.invoked == [("lookup_order", {"order_id": "A12"})] * 8
    assert run.final_output == "done" and run.requests == 9
    assert _denied(run.tool_outputs) == [] and not any(NUDGE_PREFIX in o for o in run.tool_outputs)
    spans = run.tool_spans()
    assert not [e for s in spans for e in guard_events(s)]  # no guard in this run
    blocked = [i for i, s in enumerate(spans, start=1) if processor_events(s, "would_block")]
    assert blocked and blocked[0] == 5
    assert processor_events(spans[4], "would_block")[0]["loopguard.finding.kind"] == "repeat"
    assert all("loopguard.dispatched" not in s.attributes for s in spans)


# -- enforce: guard_agent() --------------------------------------------------------------------

def test_enforce_runs_the_tool_four_times_and_denies_the_rest(runs: dict[str, Run]) -> None:
    run = runs["enforce"]
    assert run.invoked == [("lookup_order", {"order_id": "A12"})] * 4  # the 5th..8th never ran
    assert run.final_output == "done" and run.requests == 9  # not killed: the model answered
    assert _denied(run.tool_outputs) == [5, 6, 7, 8]
    assert NUDGE_PREFIX in run.tool_outputs[2] and NUDGE_PREFIX not in run.tool_outputs[1]

    spans = run.tool_spans()
    assert len(spans) == 8  # the SDK opens a function span before the guardrail denies
    [deny] = guard_events(spans[4], "deny")
    assert deny["loopguard.finding.kind"] == "repeat" and deny["loopguard.dispatched"] is False
    assert deny["loopguard.tool.name"] == "lookup_order"
    assert [bool(guard_events(s, "deny")) for s in spans] == [False] * 4 + [True] * 4
    assert [bool(guard_events(s, "warn")) for s in spans] == [False, False, True, True] + [False] * 4
    for s in spans[4:]:
        assert s.attributes["loopguard.dispatched"] is False and s.attributes["loopguard.guard"] == "repeat"
        assert s.attributes["gen_ai.tool.call.result"].startswith(DENIED_PREFIX)
    assert all("loopguard.dispatched" not in s.attributes for s in spans[:4])
    assert {b.parent_id for b in run.bodies()} == {s.span_id for s in spans[:4]}  # nothing ran in a denied span


def test_the_audit_scores_the_enforce_run_as_stopped_before_dispatch(
        runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_loopguard.audit import audit
    from otel_loopguard.audit.report import to_json

    for name in list(os.environ):
        if name.startswith("OTEL_LOOPGUARD_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", KEY)  # the processor's digest key
    [report] = json.loads(to_json(audit([runs["enforce"].path])))["runs"]
    score = report["score"]
    assert score["tool_calls"] == 4  # the four denied function spans are not counted as calls
    assert (score["guard_fired"], score["guard_seq"], score["guard_before_dispatch"]) == (True, 5, True)
    assert score["executed_after_guard"] is False
    assert "repeat" in {f["kind"] for f in report["findings"]}


# -- negative control ---------------------------------------------------------------------------

def test_pagination_with_new_cursors_has_no_decision_events(runs: dict[str, Run]) -> None:
    run = runs["pagination"]
    assert [a["cursor"] for _, a in run.invoked] == [None] + [f"p-{p}" for p in range(1, 8)]
    assert run.final_output == "done"
    assert _denied(run.tool_outputs) == [] and not any(NUDGE_PREFIX in o for o in run.tool_outputs)
    assert not [e for s in run.spans for n, e in s.events if n == "loopguard.decision"]

