"""Handoffs between agents are actions (issue 20), on real captures.

research/conventions/captures/handoffs holds the OpenAI Agents SDK handing a run back and
forth under three instrumentations (OpenInference, OpenLLMetry, the GenAI contrib one), and
two negative controls: a single handoff, and a supervisor routing to several agents. The
ping-pong must stop by the 6th handoff with a finding naming both agents, through the
receiver and the audit; the controls must raise nothing at warn or above.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_loopguard.conventions import ToolSpan, recognise
from otel_loopguard.conventions.recognise import agent_of
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.otlp.spans import SpanCollector, span_call
from otel_loopguard.otlp.values import attributes
from otel_loopguard.policy import policy_from_mapping
from otel_loopguard.receiver.runs.assembly import RunAssembler
from otel_loopguard.receiver.ingest.decoder import decode
from otel_loopguard.receiver.ops.metrics import Metrics

from .harness import RUN, ReceiverThread, Sink, attr, export_stub, findings_of, make_config, request_of, wait_for
from .test_decode import _request, _span

HANDOFFS = Path(__file__).resolve().parents[2] / "research" / "conventions" / "captures" / "handoffs"
COMBOS = ("oa_openinference", "oa_traceloop", "oa_otel_genai")
KEY = "receiver-test-key-0123456789"
PAIR = ("handoff(TriageAgent -> BillingAgent)", "handoff(BillingAgent -> TriageAgent)")


def _spans(name: str, drop: int | None = None) -> list[Span]:
    """The capture's spans; `drop`: leave out that handoff (0-based, in start order)."""
    rows = json.loads((HANDOFFS / f"{name}.json").read_text())["spans"]
    handoffs = [r for r in rows if _is_handoff(r)]
    gone = handoffs[drop]["span_id"] if drop is not None else None
    return [_span(r) for r in rows if r["span_id"] != gone]


def _is_handoff(row: dict[str, Any]) -> bool:
    found = recognise(row["attributes"], False, row["name"])
    return isinstance(found, ToolSpan) and found.tool.startswith("handoff(")


def _audit(tmp_path: Path, spans: list[Span]) -> dict[str, Any]:
    path = tmp_path / "spans.pb"
    path.write_bytes(_request(spans))
    env = {"OTEL_LOOPGUARD_KEY": KEY, "PATH": ""}
    done = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "audit", str(path), "--format", "json"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert len(runs) == 1
    return runs[0]


def _loud(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in findings if f["severity"] in ("warn", "stop")]


@pytest.mark.parametrize("combo", COMBOS)
def test_every_convention_names_both_agents_of_each_handoff(combo: str) -> None:
    spans = _spans(f"{combo}__handoff_pingpong")
    attrs = [(attributes(s.attributes), s) for s in spans]
    tools = [recognise(a, False, s.name) for a, s in attrs]
    handoffs = [t.tool for t in tools if isinstance(t, ToolSpan)]
    assert len(handoffs) == 8
    if combo == "oa_traceloop":  # the target is taken from the agent that acts next (audit, receiver)
        assert set(handoffs) == {"handoff(TriageAgent -> ?)", "handoff(BillingAgent -> ?)"}
    else:
        assert handoffs == list(PAIR) * 4


@pytest.mark.parametrize("name", sorted(p.stem for p in HANDOFFS.glob("*.json")))
def test_the_receivers_reduced_decode_reads_handoffs_as_the_full_parse_does(name: str) -> None:
    spans = _spans(name)
    decoded = decode(_request(spans)).spans
    calls = 0
    for span, d in zip(spans, decoded):
        attrs = attributes(span.attributes)
        found = recognise(attrs, span.status.code == Status.STATUS_CODE_ERROR, span.name)
        full = span_call(span, attrs, found) if isinstance(found, ToolSpan) else None
        assert d.call == full, span.name
        assert d.agent == (agent_of(attrs) if found is None else None), span.name
        calls += full is not None
    assert calls  # every capture has a handoff


@pytest.mark.parametrize("combo", COMBOS)
def test_the_audit_stops_a_handoff_ping_pong_by_the_sixth_handoff_naming_both_agents(combo: str,
                                                                                      tmp_path: Path) -> None:
    run = _audit(tmp_path, _spans(f"{combo}__handoff_pingpong"))
    stops = [f for f in run["findings"] if f["severity"] == "stop"]
    assert stops and min(f["last_seq"] for f in stops) <= 6
    cycle = next(f for f in stops if f["kind"] == "cycle")
    assert cycle["last_seq"] == 6


@pytest.mark.parametrize("combo", COMBOS)
@pytest.mark.parametrize("scenario", ("single", "supervisor"))
def test_a_single_handoff_and_a_supervisor_routing_raise_nothing(combo: str, scenario: str, tmp_path: Path) -> None:
    run = _audit(tmp_path, _spans(f"{combo}__handoff_{scenario}"))
    assert run["outcome"] == "scored"
    assert run["score"]["tool_calls"] == (1 if scenario == "single" else 5)  # the handoffs were seen
    assert _loud(run["findings"]) == []


@pytest.mark.parametrize("combo", COMBOS)
def test_mutation_without_the_third_handoff_nothing_stops_by_the_sixth(combo: str, tmp_path: Path) -> None:
    """The stop comes from the handoffs themselves: one handoff fewer breaks the pattern, and no
    stop falls within the first six handoffs any more."""
    run = _audit(tmp_path, _spans(f"{combo}__handoff_pingpong", drop=2))
    assert run["score"]["tool_calls"] == 7
    assert not [f for f in run["findings"] if f["severity"] == "stop" and f["last_seq"] <= 6]


def _audit_tools(spans: list[Span]) -> list[str]:
    """The tools of the run's calls as the audit reads them (otlp/spans.py)."""
    collector = SpanCollector()
    collector.add(ExportTraceServiceRequest.FromString(_request(spans)))
    (run,) = collector.runs()
    return [c.tool for c in run[1]]


def _receiver_tools(spans: list[Span]) -> tuple[list[str], list[Span]]:
    """The tools of the calls the receiver's assembly judged (decode -> runs), in sequence
    order, and the finding and run spans it wrote."""
    fp = Fingerprinter(load_key(key=KEY), policy_from_mapping({}))
    assembler = RunAssembler(fp, make_config(1), Metrics())
    assembler.accept(decode(_request(spans)).spans)
    (buffer,) = assembler.runs.values()
    written = assembler.flush()
    return [buffer.recent.get(seq).tool for seq in range(1, buffer.tool_calls_seen + 1)], written


def _without_agent_spans(spans: list[Span]) -> list[Span]:
    return [s for s in spans if agent_of(attributes(s.attributes)) is None]


@pytest.mark.parametrize("scenario", ("pingpong", "supervisor"))
def test_openllmetrys_handoffs_take_their_target_from_the_agent_span_that_follows(scenario: str) -> None:
    """OpenLLMetry never records a handoff's target. Each takes the agent of the agent span
    that follows it, the last one too (no handoff follows it), in the audit and in the
    receiver alike; no finding or reason says `?` or unknown."""
    spans = _spans(f"oa_traceloop__handoff_{scenario}")
    expected = (list(PAIR) * 4 if scenario == "pingpong" else
                [f"handoff({a} -> {b})" for a, b in (("Supervisor", "BillingAgent"), ("BillingAgent", "Supervisor"),
                                                     ("Supervisor", "ShippingAgent"), ("ShippingAgent", "Supervisor"),
                                                     ("Supervisor", "RefundAgent"))])
    assert _audit_tools(spans) == expected
    tools, written = _receiver_tools(spans)
    assert tools == expected
    texts = [str(attr(s, k)) for s in written for k in ("loopguard.finding.reason", "loopguard.tool.name", "input.value")]
    assert not [t for t in texts if "?" in t or "unknown" in t]
    if scenario == "pingpong":
        assert [attr(s, "loopguard.finding.last_seq") for s in written
                if attr(s, "loopguard.finding.kind") == "cycle" and attr(s, "loopguard.finding.severity") == "stop"] == [6]


@pytest.mark.parametrize("scenario", ("pingpong", "supervisor"))
def test_mutation_without_the_agent_spans_the_last_handoff_keeps_an_unknown_target(scenario: str) -> None:
    """The agent spans are what name the last target: without them every other handoff still
    takes the next handoff's source, the last keeps `?` (in the audit and the receiver)."""
    spans = _without_agent_spans(_spans(f"oa_traceloop__handoff_{scenario}"))
    last = "handoff(BillingAgent -> ?)" if scenario == "pingpong" else "handoff(Supervisor -> ?)"
    audit = _audit_tools(spans)
    assert audit[-1] == last and not [t for t in audit[:-1] if "?" in t]
    assert _receiver_tools(spans)[0] == audit


@pytest.fixture
def receiver(sink: Sink) -> Iterator[ReceiverThread]:
    r = ReceiverThread(make_config(sink.port, idle_timeout_seconds=0.3, gap_wait_seconds=30.0))
    yield r
    r.stop()


@pytest.mark.parametrize("combo", COMBOS)
def test_the_receiver_finds_the_ping_pong_and_names_both_agents(combo: str, sink: Sink,
                                                                 receiver: ReceiverThread) -> None:
    channel, stub = export_stub(receiver.port)
    with channel:
        stub.Export(request_of(_spans(f"{combo}__handoff_pingpong")), timeout=10)
    wait_for(lambda: sink.runs(), what="the run summary")
    stops = [f for f in findings_of(sink, kind="cycle") if attr(f, "loopguard.finding.severity") == "stop"]
    assert stops and attr(stops[0], "loopguard.finding.last_seq") == 6
    reason = attr(stops[0], "loopguard.finding.reason")
    assert all(p in reason for p in PAIR) and "unknown" not in reason and "?" not in reason


@pytest.mark.parametrize("combo", COMBOS)
def test_the_receiver_is_quiet_on_a_supervisor_routing(combo: str, sink: Sink, receiver: ReceiverThread) -> None:
    channel, stub = export_stub(receiver.port)
    with channel:
        stub.Export(request_of(_spans(f"{combo}__handoff_supervisor")), timeout=10)
    wait_for(lambda: sink.runs(), what="the run summary")
    loud = [f for f in findings_of(sink) if attr(f, "loopguard.finding.severity") in ("warn", "stop")]
    assert loud == []


def _per_turn(combo: str, conversation: str, scenario: str = "pingpong", turns_n: int = 4) -> list[list[Span]]:
    """A capture as a conversation of user turns, one trace each (two agents a turn, the last
    turn takes the rest), every span carrying the conversation id as an app's baggage
    processor would put it."""
    rows = json.loads((HANDOFFS / f"{combo}__handoff_{scenario}.json").read_text())["spans"]
    agents = [r for r in rows if "agent.name" in r["attributes"] or "gen_ai.agent.name" in r["attributes"]
              and r["attributes"].get("gen_ai.operation.name") == "invoke_agent"]
    turns: list[list[Span]] = [[] for _ in range(turns_n)]
    turn_of = {}
    for i, agent in enumerate(agents):  # each agent's turn, then what it contains
        turn_of[agent["span_id"]] = min(i // 2, turns_n - 1)
    by_id = {r["span_id"]: r for r in rows}
    for r in rows:
        up = r
        while up is not None and up["span_id"] not in turn_of:
            up = by_id.get(up["parent_span_id"] or "")
        if up is None:
            continue  # the workflow's own spans: one per conversation turn is enough
        t = turn_of[up["span_id"]]
        row = dict(r, trace_id=f"{t + 1:032x}", attributes=dict(r["attributes"], **{"gen_ai.conversation.id": conversation}))
        if r["span_id"] == up["span_id"]:  # each turn's first agent is its trace's root
            first = next(a for a in agents if turn_of[a["span_id"]] == t)
            row["parent_span_id"] = None if first is r else first["span_id"]
        turns[t].append(_span(row))
    return turns


@pytest.mark.parametrize("combo", COMBOS)
def test_a_ping_pong_across_the_traces_of_one_conversation_is_one_run_and_found(combo: str, sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=0.5, gap_wait_seconds=30.0,
                                          run_id_attribute="gen_ai.conversation.id"))
    try:
        turns = _per_turn(combo, f"conversation-{combo}")
        assert all(turns) and sum(len(t) for t in turns) > 8
        channel, stub = export_stub(receiver.port)
        with channel:
            for spans in turns:  # one request per user turn, inside the idle timeout
                stub.Export(request_of(spans), timeout=10)
        summaries = wait_for(lambda: sink.runs(), what="the conversation's summary")
        assert len(summaries) == 1 and attr(summaries[0], "loopguard.run.id") == f"conversation-{combo}"
        stops = [f for f in findings_of(sink, kind="cycle") if attr(f, "loopguard.finding.severity") == "stop"]
        assert stops and attr(stops[0], "loopguard.finding.last_seq") == 6
        assert all(p in attr(stops[0], "loopguard.finding.reason") for p in PAIR)
    finally:
        receiver.stop()


@pytest.mark.parametrize("combo", COMBOS)
def test_a_conversations_turns_are_judged_as_each_trace_ends_not_at_the_idle_timeout(combo: str, sink: Sink) -> None:
    """With a 60 s idle timeout the run stays open, yet the stop leaves once the turn that
    completes the evidence has ended (root span + grace): each turn's calls are judged then,
    numbered on from the turns before."""
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=60.0, gap_wait_seconds=30.0,
                                          run_id_attribute="gen_ai.conversation.id"))
    try:
        channel, stub = export_stub(receiver.port)
        with channel:
            for spans in _per_turn(combo, f"prompt-{combo}"):
                stub.Export(request_of(spans), timeout=10)
        stops = wait_for(lambda: [f for f in findings_of(sink, kind="cycle")
                                  if attr(f, "loopguard.finding.severity") == "stop"], timeout=8.0, what="the stop")
        assert attr(stops[0], "loopguard.finding.last_seq") == 6
        assert all(p in attr(stops[0], "loopguard.finding.reason") for p in PAIR)
        assert not sink.runs()  # the conversation is still open: no summary yet
    finally:
        receiver.stop()


@pytest.mark.parametrize("combo", COMBOS)
def test_a_supervisor_routing_over_three_turns_raises_nothing(combo: str, sink: Sink) -> None:
    """Negative control for the turn-by-turn judging: a supervisor's routing split over three
    traces of one conversation raises nothing, and every handoff is counted once."""
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=0.5, gap_wait_seconds=30.0,
                                          run_id_attribute="gen_ai.conversation.id"))
    try:
        channel, stub = export_stub(receiver.port)
        with channel:
            for spans in _per_turn(combo, f"sup-{combo}", "supervisor", 3):
                stub.Export(request_of(spans), timeout=10)
        summary = wait_for(lambda: sink.runs(), what="the summary")[0]
        assert attr(summary, "loopguard.score.tool_calls") == 5
        assert not [f for f in findings_of(sink) if attr(f, "loopguard.finding.severity") in ("warn", "stop")]
    finally:
        receiver.stop()


LANGGRAPH = ("lg_openinference", "lg_traceloop")
LG_PAIR = ("handoff(triage -> billing)", "handoff(billing -> triage)")


@pytest.mark.parametrize("combo", LANGGRAPH)
def test_a_langgraph_handoff_tool_is_a_handoff_named_by_its_agents(combo: str) -> None:
    """LangGraph's swarm handoff tools (`transfer_to_billing` returning Command(goto=...,
    graph=PARENT)) are plain tool spans: their results differ in the tool call id, so as tool
    calls they look like progress. Read as handoffs, (source, target) is the action."""
    spans = _spans(f"{combo}__handoff_pingpong")
    tools = [recognise(attributes(s.attributes), False, s.name) for s in spans]
    assert [t.tool for t in tools if isinstance(t, ToolSpan)] == list(LG_PAIR) * 4


@pytest.mark.parametrize("combo", LANGGRAPH)
def test_the_audit_and_the_receiver_stop_a_langgraph_ping_pong_by_the_sixth_handoff(
        combo: str, tmp_path: Path, sink: Sink, receiver: ReceiverThread) -> None:
    run = _audit(tmp_path, _spans(f"{combo}__handoff_pingpong"))
    assert next(f for f in run["findings"] if f["kind"] == "cycle" and f["severity"] == "stop")["last_seq"] == 6
    assert _loud(_audit(tmp_path, _spans(f"{combo}__handoff_single"))["findings"]) == []
    channel, stub = export_stub(receiver.port)
    with channel:
        stub.Export(request_of(_spans(f"{combo}__handoff_pingpong")), timeout=10)
    wait_for(lambda: sink.runs(), what="the run summary")
    stop = next(f for f in findings_of(sink, kind="cycle") if attr(f, "loopguard.finding.severity") == "stop")
    assert all(p in attr(stop, "loopguard.finding.reason") for p in LG_PAIR)


def test_mutation_a_command_result_of_another_shape_is_a_plain_tool_call() -> None:
    """Only a Command to the parent graph is a handoff: the same span whose result is a
    Command within the agent's own graph stays the tool call it is."""
    row = next(r for r in json.loads((HANDOFFS / "lg_openinference__handoff_pingpong.json").read_text())["spans"]
               if r["name"] == "transfer_to_billing")
    inner = dict(row["attributes"], **{"output.value": row["attributes"]["output.value"].replace("__parent__", "")})
    found = recognise(inner, False, row["name"])
    assert isinstance(found, ToolSpan) and found.tool == "transfer_to_billing"


def test_an_untagged_openllmetry_handoff_in_a_run_the_processor_numbered_does_not_spoil_it(sink: Sink) -> None:
    """The processor leaves an OpenLLMetry handoff (target unknown when it ends) untagged. In a
    run whose tool calls it numbered, that handoff has no place in the numbering: it is left
    out, and the run is still scored (no integrity_conflict), its tool loop still found.
    Mutation: the same span naming its target is an unnumbered call like any other, which makes
    the run mixed (integrity_error): only a handoff waiting for its target is left out."""
    assert _mixed_run_outcome(sink, with_target=False) == "scored"


def test_mutation_an_unnumbered_handoff_naming_its_target_makes_the_run_mixed(sink: Sink) -> None:
    assert _mixed_run_outcome(sink, with_target=True) == "integrity_error"


def _mixed_run_outcome(sink: Sink, with_target: bool) -> Any:
    from .harness import TaggedRun, make_span

    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=0.3, gap_wait_seconds=30.0))
    try:
        run = TaggedRun(seed=91)
        handoff = make_span(run.trace_id, b"\x91" * 8, "TriageAgent \u2192 unknown.handoff", parent=run.root_id,
                            start=run.t0 + 10, end=run.t0 + 20,
                            attributes={"traceloop.span.kind": "handoff", "gen_ai.operation.name": "handoff",
                                        "gen_ai.handoff.from_agent": "TriageAgent",
                                        **({"gen_ai.handoff.to_agent": "BillingAgent"} if with_target else {})})
        channel, stub = export_stub(receiver.port)
        with channel:
            stub.Export(request_of([handoff] + [run.call(seq) for seq in range(1, 6)] + [run.root()]), timeout=10)
        summary = wait_for(lambda: sink.runs(), what="the summary")[0]
        assert [f for f in findings_of(sink, kind="repeat") if attr(f, "loopguard.finding.severity") == "stop"]
        assert bool(findings_of(sink, kind="integrity_conflict")) == with_target
        return attr(summary, "loopguard.run.outcome")
    finally:
        receiver.stop()


@pytest.mark.parametrize("with_target", [False, True])
def test_the_audit_leaves_out_a_waiting_handoff_from_a_numbered_run_as_the_receiver_does(
        with_target: bool, tmp_path: Path) -> None:
    """The audit's side of the test above, with the same mutation."""
    from .harness import TaggedRun, make_span

    run = TaggedRun(seed=92)
    handoff = make_span(run.trace_id, b"\x92" * 8, "TriageAgent \u2192 unknown.handoff", parent=run.root_id,
                        start=run.t0 + 10, end=run.t0 + 20,
                        attributes={"traceloop.span.kind": "handoff", "gen_ai.handoff.from_agent": "TriageAgent",
                                    **({"gen_ai.handoff.to_agent": "BillingAgent"} if with_target else {})})
    request = request_of([handoff] + [run.call(seq) for seq in range(1, 6)])
    path = tmp_path / "mixed.pb"
    path.write_bytes(request.SerializeToString())
    done = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "audit", str(path), "--format", "json"],
                          capture_output=True, text=True, env={"OTEL_LOOPGUARD_KEY": KEY, "PATH": ""}, timeout=60)
    outcome = json.loads(done.stdout)["runs"][0]["outcome"]
    assert outcome == ("integrity_error" if with_target else "scored")


LG_SUPERVISOR = ("handoff(supervisor -> billing)", "handoff(supervisor -> shipping)", "handoff(supervisor -> refund)")


@pytest.mark.parametrize("combo", LANGGRAPH)
def test_a_langgraph_supervisors_handoffs_name_the_supervisor(combo: str) -> None:
    """langgraph-supervisor's supervisor is a `create_react_agent`, which sets no
    `lc_agent_name`: the source is the node it runs as, from LangGraph's checkpoint namespace."""
    assert _audit_tools(_spans(f"{combo}__handoff_supervisor")) == list(LG_SUPERVISOR)
    assert _audit_tools(_spans(f"{combo}__handoff_bounce")) == list(LG_SUPERVISOR[:2]) * 3


@pytest.mark.parametrize("combo", LANGGRAPH)
def test_a_langgraph_supervisor_routing_to_three_workers_raises_nothing(
        combo: str, tmp_path: Path, sink: Sink, receiver: ReceiverThread) -> None:
    """Negative control (a real langgraph-supervisor run): billing, shipping, refund, each
    worker answering and going back by the graph's edge: three handoffs, nothing at warn or
    above, in the audit and the receiver."""
    spans = _spans(f"{combo}__handoff_supervisor")
    run = _audit(tmp_path, spans)
    assert run["outcome"] == "scored" and run["score"]["tool_calls"] == 3
    assert _loud(run["findings"]) == []
    channel, stub = export_stub(receiver.port)
    with channel:
        stub.Export(request_of(spans), timeout=10)
    summary = wait_for(lambda: sink.runs(), what="the run summary")[0]
    assert attr(summary, "loopguard.score.tool_calls") == 3
    assert not [f for f in findings_of(sink) if attr(f, "loopguard.finding.severity") in ("warn", "stop")]


@pytest.mark.parametrize("combo", LANGGRAPH)
def test_mutation_the_same_supervisor_bouncing_between_two_workers_stops_at_the_sixth_handoff(
        combo: str, tmp_path: Path, sink: Sink, receiver: ReceiverThread) -> None:
    """The control's twin: the supervisor sends the run to billing, shipping, billing, ...
    (6 handoffs): a cycle that stops at the 6th, naming the supervisor and both workers."""
    spans = _spans(f"{combo}__handoff_bounce")
    run = _audit(tmp_path, spans)
    assert next(f for f in run["findings"] if f["kind"] == "cycle" and f["severity"] == "stop")["last_seq"] == 6
    channel, stub = export_stub(receiver.port)
    with channel:
        stub.Export(request_of(spans), timeout=10)
    wait_for(lambda: sink.runs(), what="the run summary")
    stop = next(f for f in findings_of(sink, kind="cycle") if attr(f, "loopguard.finding.severity") == "stop")
    assert attr(stop, "loopguard.finding.last_seq") == 6
    assert all(p in attr(stop, "loopguard.finding.reason") for p in LG_SUPERVISOR[:2])


@pytest.mark.parametrize("namespace, node", [
    ("supervisor:5c12|tools:e560", "supervisor"),
    ("outer:1|billing:2|tools:3", "billing"),
    ("tools:e560", None),  # a tool node of the top graph: no agent around it
    ("", None),
    (None, None),
])
def test_the_source_node_is_the_one_before_the_tool_node(namespace: Any, node: Any) -> None:
    from otel_loopguard.conventions.handoffs import node_of_namespace

    assert node_of_namespace(namespace) == node
