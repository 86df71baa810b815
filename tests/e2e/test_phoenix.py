"""End to end on a real tracing backend: app -> `otel-loopguard serve --forward` -> Arize Phoenix.

A scripted agent in this process, traced with the real OpenTelemetry SDK and
`otel_loopguard.install()`, calls `lookup_order` six times with the same arguments and
exports over OTLP/gRPC to the receiver, run as `python -m otel_loopguard.cli serve
--forward` in a subprocess, which forwards to a real Phoenix (`phoenix serve`, embedded
SQLite in a temp dir) in another subprocess. The test then reads back what Phoenix stored,
through its REST API (`GET /v1/projects/{project}/spans?trace_id=...`), and checks the
contract (CONTRACT.md section 2) as a user of that backend would see it:

- the app's spans reached Phoenix exactly once each, tool spans tagged by the processor
  (`loopguard.args.digest`, `loopguard.seq`);
- a `loopguard.finding` span of kind `repeat`, severity `stop`, in the same trace, under the
  agent's root span, whose `loopguard.finding.span_ids` (and `loopguard.call` events) name
  the first five tool spans as Phoenix stores them. Phoenix keeps no span links, so this
  attribute is what makes the finding navigable there;
- that it stands out there (CONTRACT v1.1): named `loopguard.finding stop repeat lookup_order`,
  status ERROR with the reason, kind GUARDRAIL with input and output values, and the GenAI
  `gen_ai.evaluation.result` event; a warn finding of the same run stays UNSET (the negative
  control), and the run summary `loopguard.run scored/fail` is an ERROR EVALUATOR;
- the finding spans were filed into the app's Phoenix project (Phoenix files a span into the
  project of its trace once the trace exists, whatever the span's own resource says);
- a `loopguard.run` summary span;
- the receiver exits 0 on SIGTERM.

A second test gives the receiver Phoenix's URL (`--annotate-phoenix-url`) and runs a looping
and a healthy agent: the looping trace gets the `loopguard` annotation (`stop: repeat
lookup_order x5`, score 5)
(`GET /v1/projects/{project}/trace_annotations`), the healthy one none, and the filters
docs/deployment.md gives, run by Phoenix's own filter engine (GraphQL), list the looping trace
and nothing of the healthy one.

Everything listens on and talks to 127.0.0.1 only. Phoenix is started with telemetry and
external resources disabled, and through `_phoenix_loopback.py`, which keeps its OTLP/gRPC
port (bound to every interface by Phoenix itself) on loopback.

Skipped only when `phoenix` (the `phoenix` extra, arize-phoenix 20.x) is not installed;
scripts/test.sh installs it, so CI runs this test.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from live import child_env, free_port, stop, tail

from .agents import TOOL, AgentRun, run_agents
from .phoenix_server import Phoenix, phoenix_installed, running_phoenix

pytestmark = pytest.mark.skipif(
    not phoenix_installed(),
    reason="arize-phoenix is not installed (pip install -e '.[phoenix]'); this test needs a real Phoenix server",
)

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "loopguard-e2e"
KEY = "e2e-phoenix-" + secrets.token_hex(16)
CALLS = 6


@dataclass
class Receiver:
    proc: subprocess.Popen
    port: int
    stdout: Path
    stderr: Path


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[Phoenix]:
    with running_phoenix(tmp_path) as server:
        yield server


@contextmanager
def _serving(phoenix: Phoenix, tmp_path: Path, *extra: str) -> Iterator[Receiver]:
    """`otel-loopguard serve --forward <phoenix grpc>`, started while Phoenix is still booting."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    port = free_port()
    env = child_env(lambda k: k.startswith(("OTEL_EXPORTER_OTLP", "OTEL_LOOPGUARD_", "PHOENIX_")))
    env["OTEL_LOOPGUARD_KEY"] = KEY
    stdout, stderr = tmp_path / "receiver.out", tmp_path / "receiver.err"
    with stdout.open("w") as out, stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "otel_loopguard.cli", "serve", "--listen", f"127.0.0.1:{port}",
             "--forward", f"127.0.0.1:{phoenix.grpc_port}", "--root-grace-seconds", "0.5", *extra],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 20
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)]) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while True:
                assert proc.poll() is None, f"receiver exited with {proc.returncode}:\n{tail(stderr)}"
                try:
                    if health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.RpcError:
                    pass
                assert time.monotonic() < deadline, f"receiver never became healthy:\n{tail(stderr)}"
                time.sleep(0.1)
        yield Receiver(proc, port, stdout, stderr)
    finally:
        stop(proc)


@pytest.fixture
def receiver(phoenix: Phoenix, tmp_path: Path) -> Iterator[Receiver]:
    with _serving(phoenix, tmp_path) as running:
        yield running


@pytest.fixture
def annotating_receiver(phoenix: Phoenix, tmp_path: Path) -> Iterator[Receiver]:
    """The same, with the opt-in Phoenix trace annotations on."""
    with _serving(phoenix, tmp_path, "--annotate-phoenix-url", phoenix.url) as running:
        yield running


def _run_looping_agent(receiver_port: int) -> AgentRun:
    """Six identical lookup_order calls (GenAI execute_tool spans, chat spans between) under a root."""
    return _run_agents(receiver_port, [{"order_id": "A12"}] * CALLS)[0]


def _run_agents(receiver_port: int, *runs: list[dict[str, Any]]) -> list[AgentRun]:
    return run_agents(receiver_port, runs, key=KEY,
                      resource={"service.name": "loopguard-e2e-agent", "openinference.project.name": PROJECT})


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return span["attributes"]


def _named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Spans named `name`, or (for our own) named `name` followed by detail."""
    return [s for s in spans if s["name"] == name or s["name"].split(" ", 1)[0] == name]


def _findings(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As the contract says consumers identify them: by loopguard.finding.kind."""
    return [s for s in spans if "loopguard.finding.kind" in _attrs(s)]


def _is_repeat_stop(span: dict[str, Any]) -> bool:
    a = _attrs(span)
    return a.get("loopguard.finding.kind") == "repeat" and a.get("loopguard.finding.severity") == "stop"


def test_findings_reach_phoenix_in_the_agents_trace(
    phoenix: Phoenix, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    t0 = time.monotonic()
    for var in ("no_proxy", "NO_PROXY"):  # the app's OTLP exporter (gRPC) must not go through a proxy
        monkeypatch.setenv(var, "127.0.0.1,localhost")
    phoenix.wait_healthy(60)
    run = _run_looping_agent(receiver.port)

    # Poll Phoenix until everything has been stored (bounded): the app's spans, a repeat/stop
    # finding and the run summary.
    deadline = time.monotonic() + 30
    while True:
        spans = phoenix.spans(PROJECT, run.trace_id)
        ids = {s["context"]["span_id"] for s in spans}
        done = (set(run.app_ids) <= ids and any(_is_repeat_stop(s) for s in _findings(spans))
                and _named(spans, "loopguard.run"))
        if done:
            break
        assert time.monotonic() < deadline, (
            f"Phoenix has not stored the expected spans after 30 s; it has {sorted(s['name'] for s in spans)}\n"
            f"receiver stderr:\n{tail(receiver.stderr)}\nphoenix log:\n{tail(phoenix.log)}")
        time.sleep(0.5)
    time.sleep(1.0)  # anything sent twice would have arrived by now
    spans = phoenix.spans(PROJECT, run.trace_id)

    # Every span is in the agent's trace (the query asked for it; Phoenix agrees).
    assert {s["context"]["trace_id"] for s in spans} == {run.trace_id}

    # The app's own spans reached Phoenix exactly once each (inline mode forwards each unique span once).
    app = [s for s in spans if s["context"]["span_id"] in set(run.app_ids)]
    assert sorted(s["context"]["span_id"] for s in app) == sorted(run.app_ids)
    others = [s["name"] for s in spans if s["context"]["span_id"] not in set(run.app_ids)]
    assert {n.split(" ", 1)[0] for n in others} <= {"loopguard.finding", "loopguard.run"}, others

    # Tool spans carry the processor's tags, as Phoenix stores them.
    tools = sorted(_named(spans, f"execute_tool {TOOL}"), key=lambda s: _attrs(s)["loopguard.seq"])
    assert len(tools) == CALLS
    assert [s["context"]["span_id"] for s in tools] == run.tool_ids  # seq order == dispatch order
    assert [_attrs(s)["loopguard.seq"] for s in tools] == list(range(1, CALLS + 1))
    digests = {_attrs(s)["loopguard.args.digest"] for s in tools}
    assert len(digests) == 1, digests  # six identical calls, one action digest
    digest = digests.pop()
    assert len(digest) == 32 and all(c in "0123456789abcdef" for c in digest)
    assert all(_attrs(s)["loopguard.tool.name"] == TOOL for s in tools)
    assert all(s["parent_id"] == run.root_id for s in tools)

    # The finding: repeat/stop over calls 1-5, a new span in the same trace, under the agent's root.
    findings = _findings(spans)
    stops = [s for s in findings if _is_repeat_stop(s)]
    assert len(stops) == 1, [_attrs(s) for s in findings]
    finding = stops[0]
    a = _attrs(finding)
    first_five = [s["context"]["span_id"] for s in tools[:5]]
    assert a["loopguard.finding.span_ids"] == first_five == run.tool_ids[:5]
    assert finding["context"]["trace_id"] == run.trace_id
    assert finding["parent_id"] == run.root_id
    assert finding["context"]["span_id"] not in run.app_ids  # a new span; nothing exported was modified
    assert (a["loopguard.finding.first_seq"], a["loopguard.finding.last_seq"], a["loopguard.finding.count"]) == (1, 5, 5)
    assert a["loopguard.tool.name"] == TOOL
    assert a["loopguard.args.digest"] == digest
    assert a["loopguard.run.id"] == run.trace_id
    assert a["loopguard.finding.reason"] and a["loopguard.policy.version"]
    # Start/end = first offending call's start, last offending call's end.
    assert finding["start_time"] == tools[0]["start_time"]
    assert finding["end_time"] == tools[4]["end_time"]
    # One loopguard.call event per offending call; Phoenix keeps events (it keeps no links).
    calls = [e for e in finding["events"] if e["name"] == "loopguard.call"]
    assert [e["attributes"]["span_id"] for e in calls] == first_five
    assert [e["attributes"]["loopguard.seq"] for e in calls] == [1, 2, 3, 4, 5]
    assert "links" not in finding

    # What makes it stand out in Phoenix (CONTRACT v1.1): a descriptive name, status ERROR with
    # the reason (Phoenix's error mark, banner and `status_code == 'ERROR'` filters), the
    # GUARDRAIL kind with Input and Output panels, and the GenAI evaluation result event.
    reason = a["loopguard.finding.reason"]
    assert finding["name"] == f"loopguard.finding stop repeat {TOOL}"
    assert (finding["status_code"], finding["status_message"]) == ("ERROR", reason)
    assert finding["span_kind"] == "GUARDRAIL"
    assert json.loads(a["input.value"]) == {"tool": TOOL, "calls": "1-5", "arguments": json.dumps({"order_id": "A12"})}
    assert a["output.value"] == reason
    (evaluation,) = [e for e in finding["events"] if e["name"] == "gen_ai.evaluation.result"]
    assert evaluation["attributes"] == {"gen_ai.evaluation.name": "loopguard.repeat",
                                        "gen_ai.evaluation.score.label": "stop",
                                        "gen_ai.evaluation.explanation": reason}
    # One loop, one finding (issue 29): the warn at call 3 is folded into the stop when they
    # leave the receiver together, else named by it; either way the stop says when it came.
    assert a["loopguard.finding.warned_at_seq"] == 3
    # Negative control: a warn finding that left on its own is a guardrail too, but not an error
    # (tests/receiver/test_e2e.py sends one for certain).
    warns = [s for s in findings if _attrs(s)["loopguard.finding.severity"] == "warn"]
    assert all(w["status_code"] == "UNSET" and w["span_kind"] == "GUARDRAIL" for w in warns)
    assert all(w["name"] == f"loopguard.finding warn repeat {TOOL}" for w in warns)

    # The run summary.
    (summary,) = _named(spans, "loopguard.run")
    s = _attrs(summary)
    assert s["loopguard.run.id"] == run.trace_id
    assert s["loopguard.run.outcome"] == "scored"
    assert "loopguard.score.termination_reason" in s
    assert any(k.startswith("loopguard.score.") and k != "loopguard.score.termination_reason" for k in s)
    assert summary["name"] == "loopguard.run scored/fail" and summary["span_kind"] == "EVALUATOR"
    assert summary["status_code"] == "ERROR"
    assert summary["status_message"].startswith("the run fails the release rule: uncontained_loop")

    # Phoenix filed the finding and run spans into the app's project (their trace's project), not
    # into the default project their own resource (service.name=otel-loopguard) would pick.
    assert phoenix.spans("default", run.trace_id) == []

    # SIGTERM: graceful shutdown, exit status 0.
    receiver.proc.send_signal(signal.SIGTERM)
    assert receiver.proc.wait(20) == 0, tail(receiver.stderr)
    err = receiver.stderr.read_text()
    assert f"finding repeat/stop tool={TOOL} run={run.trace_id} seq=1-5" in err, err
    assert KEY not in err and KEY not in receiver.stdout.read_text()
    assert time.monotonic() - t0 < 90


def test_the_annotation_marks_the_looping_trace_in_phoenix_and_not_the_healthy_one(
    phoenix: Phoenix, annotating_receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve --annotate-phoenix-url`: the loop's verdict is also a trace annotation (POST
    /v1/trace_annotations), which Phoenix's traces list shows and charts; a healthy trace gets none.
    The span annotations and what the page shows: tests/e2e/test_phoenix_ui.py."""
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")
    phoenix.wait_healthy(60)
    looping, healthy = _run_agents(annotating_receiver.port, [{"order_id": "A12"}] * CALLS,
                                   [{"order_id": f"A{i}"} for i in range(1, CALLS + 1)])

    deadline = time.monotonic() + 45
    while True:
        notes = phoenix.trace_annotations(PROJECT, [looping.trace_id])
        summaries = [_named(phoenix.spans(PROJECT, r.trace_id), "loopguard.run") for r in (looping, healthy)]
        # the span annotation of the call enforce would deny is posted apart: the filters below read it
        if notes and all(summaries) and phoenix.span_labelled(PROJECT, looping.trace_id, "would deny"):
            break
        assert time.monotonic() < deadline, (
            f"no annotation on the looping trace after 45 s (summaries: {summaries})\n"
            f"receiver stderr:\n{tail(annotating_receiver.stderr)}\nphoenix log:\n{tail(phoenix.log)}")
        time.sleep(0.5)

    (note,) = [n for n in notes if n["name"] == "loopguard"]
    stop_finding = next(s for s in _findings(phoenix.spans(PROJECT, looping.trace_id)) if _is_repeat_stop(s))
    assert note["trace_id"] == looping.trace_id
    assert note["annotator_kind"] == "CODE"
    assert note["result"]["label"] == f"stop: repeat {TOOL} x5" and note["result"]["score"] == 5
    reason, finding_id = _attrs(stop_finding)["loopguard.finding.reason"], stop_finding["context"]["span_id"]
    assert note["result"]["explanation"] == f"{reason} (finding span {finding_id})"
    assert note["identifier"] == ""  # one per trace
    assert note["metadata"]["finding.kind"] == "repeat" and note["metadata"]["tool.name"] == TOOL
    assert note["metadata"]["finding.span_id"] == finding_id
    # The healthy trace: judged (its summary is there, passing), and no annotation at all.
    (healthy_summary,) = summaries[1]
    assert healthy_summary["name"] == "loopguard.run scored/pass" and healthy_summary["status_code"] == "UNSET"
    time.sleep(1.0)  # an annotation sent with the summary's batch would have landed by now
    assert phoenix.trace_annotations(PROJECT, [healthy.trace_id]) == []

    # The filters docs/deployment.md gives, typed into Phoenix's own filter language: each lists
    # the looping trace (its root span) or its stop finding, and nothing of the healthy trace.
    roots = "parent_id is None"
    for condition, trace_condition, expected in [
        (roots, "any(span.span_kind == 'GUARDRAIL' and span.status_code == 'ERROR' for span in spans)", "invoke_agent support"),
        (roots, "trace_annotations['loopguard'].score >= 5", "invoke_agent support"),
        (roots, "'stop:' in trace_annotations['loopguard'].label", "invoke_agent support"),
        ("span_kind == 'GUARDRAIL' and status_code == 'ERROR'", None, f"loopguard.finding stop repeat {TOOL}"),
        ("attributes['loopguard']['finding']['kind'] == 'repeat' and status_code == 'ERROR'", None,
         f"loopguard.finding stop repeat {TOOL}"),
        ("'would deny' in annotations['loopguard'].label", None, f"execute_tool {TOOL}"),  # the 5th call
        # The root span install() marked (processor/root.py): the run's status, and its verdict.
        (f"{roots} and status_code == 'ERROR'", None, "invoke_agent support"),
        ("attributes['loopguard']['run']['verdict'] == 'stop'", None, "invoke_agent support"),
    ]:
        assert phoenix.filtered(PROJECT, condition, trace_condition) == [(looping.trace_id, expected)], condition

    annotating_receiver.proc.send_signal(signal.SIGTERM)
    assert annotating_receiver.proc.wait(20) == 0, tail(annotating_receiver.stderr)
    err = annotating_receiver.stderr.read_text()
    assert "trace annotations named 'loopguard'" in err and "refused" not in err, err
