"""Audit inputs built from REAL OpenTelemetry SDK spans: OTLP protobuf, OTLP/JSON and
OTLP/JSON one request a line (Collector file exporter), plus NDJSON records.

The scripted agents (audit_agent_spans.py) emit GenAI `execute_tool` / OpenInference
`TOOL` / Traceloop `tool` spans and chat model spans through a TracerProvider with an
InMemorySpanExporter; `encode_spans` turns them into an ExportTraceServiceRequest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit_agent_spans import (
    ORDER_ARGS,
    ORDER_RESULT,
    T0,
    STEP_NS,
    Tool,
    healthy_agent,
    looping_agent,
    record_agent,
    shuffled,
    to_request,
    trace_id_hex,
    write_otlp_json,
    write_otlp_ndjson,
    write_pb,
)
from audit_helpers import CALL_LINE, SEED_POLICY, findings_of, only_run, write_ndjson

CONVENTIONS = ("gen_ai", "openinference", "traceloop")

LOOP_FINDINGS = [  # six identical lookups under the built-in policy
    ("repeat", "warn", 1, 3, 3, "lookup_order"),
    ("no_progress", "warn", 2, 4, 3, None),
    ("repeat", "stop", 1, 5, 5, "lookup_order"),
]


def call_rows(text: str) -> list[tuple[str, ...]]:
    """(seq, call id, tool, digest prefix, outcome) of every call line of a text report."""
    return [m.groups() for m in map(CALL_LINE.match, text.splitlines()) if m]


def three_formats(tmp_path: Path, spans, stem: str) -> list[Path]:
    request = to_request(spans)
    cut = T0 + 3 * STEP_NS  # the Collector wrote two batches: one request a line
    first = to_request(s for s in spans if s.end_time < cut)
    second = to_request(s for s in spans if s.end_time >= cut)
    return [
        write_pb(tmp_path / f"{stem}.pb", request),
        write_otlp_json(tmp_path / f"{stem}.json", request),
        write_otlp_ndjson(tmp_path / f"{stem}.otlp.ndjson", first, second),
    ]


# --- one agent, three formats -------------------------------------------------------------


@pytest.mark.real  # starts a process
def test_the_same_looping_agent_gives_the_same_findings_from_all_three_formats(audit, tmp_path: Path) -> None:
    spans = record_agent(looping_agent(6))
    run_id = trace_id_hex(spans)
    paths = three_formats(tmp_path, spans, "loop")
    assert paths[2].read_text().count("\n") == 2  # really one request a line

    reports = []
    for path in paths:
        code, doc = audit.json(path)
        assert code == 1
        run = only_run(doc)
        assert run["run_id"] == run_id and run["outcome"] == "scored"
        reports.append(run)
    assert findings_of(reports[0]) == LOOP_FINDINGS
    assert findings_of(reports[1]) == findings_of(reports[0]) == findings_of(reports[2])
    assert reports[1]["score"] == reports[0]["score"] == reports[2]["score"]


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_every_convention_gives_the_same_calls_digests_and_findings(audit_fast, tmp_path: Path, convention) -> None:
    spans = record_agent(looping_agent(6), convention=convention)
    texts, docs = [], []
    for path in three_formats(tmp_path, spans, convention):
        texts.append(audit_fast(path).stdout)
        docs.append(only_run(audit_fast.json(path)[1]))

    rows = call_rows(texts[0])
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [(f"{i:06d}", f"call_{i:02d}", "lookup_order", "ok") for i in range(1, 7)]
    assert len({r[3] for r in rows}) == 1
    assert call_rows(texts[1]) == rows == call_rows(texts[2])
    assert [findings_of(d) for d in docs] == [LOOP_FINDINGS] * 3

    # NDJSON records of the same agent: the same canonical actions, the same key -> the same digests.
    records = write_ndjson(tmp_path / "records.ndjson", [
        {"sequence": i, "call_id": f"call_{i:02d}", "turn": i, "tool": "lookup_order",
         "arguments": ORDER_ARGS, "observation": ORDER_RESULT}
        for i in range(1, 7)
    ])
    assert call_rows(audit_fast(records).stdout) == rows
    assert findings_of(only_run(audit_fast.json(records)[1])) == LOOP_FINDINGS


def test_chat_spans_number_the_turns_so_parallel_siblings_are_not_a_loop(audit_fast, tmp_path: Path) -> None:
    # Three decisions, each requesting the same lookup twice in parallel.
    steps = [[Tool("lookup_order", ORDER_ARGS, ORDER_RESULT, f"c{i}a"), Tool("lookup_order", ORDER_ARGS, ORDER_RESULT, f"c{i}b")]
             for i in range(1, 4)]
    path = write_pb(tmp_path / "parallel.pb", to_request(record_agent(steps)))

    code, doc = audit_fast.json(path, policy=SEED_POLICY)
    run = only_run(doc)
    kinds = [(f["kind"], f["severity"]) for f in run["findings"]]
    assert kinds.count(("parallel_duplicate", "info")) == 3
    repeat = [f for f in run["findings"] if f["kind"] == "repeat"]
    # The repeat counts decisions (3), never the six sibling calls.
    assert [(f["severity"], f["count"]) for f in repeat] == [("stop", 3)]
    assert run["score"]["tool_calls"] == 6


# --- merging, duplicates, ordering -------------------------------------------------------


def test_a_run_split_across_two_files_is_merged(audit_fast, tmp_path: Path) -> None:
    spans = record_agent(looping_agent(6), seed=7)
    early = [s for s in spans if s.start_time < T0 + 3 * STEP_NS]
    late = [s for s in spans if s not in early]
    whole = write_pb(tmp_path / "whole.pb", to_request(spans))
    part1 = write_pb(tmp_path / "part1.pb", to_request(early))
    part2 = write_otlp_ndjson(tmp_path / "part2.otlp.ndjson", to_request(late))

    _, whole_doc = audit_fast.json(whole)
    code, split_doc = audit_fast.json(part1, part2)
    assert code == 1
    run = only_run(split_doc)
    assert run["run_id"] == trace_id_hex(spans)
    assert findings_of(run) == findings_of(only_run(whole_doc)) == LOOP_FINDINGS
    assert run["score"] == only_run(whole_doc)["score"]
    # Either half alone is a different (shorter) run.
    assert findings_of(only_run(audit_fast.json(part1)[1])) != LOOP_FINDINGS


def test_ndjson_records_of_one_run_id_are_merged_across_files(audit_fast, tmp_path: Path) -> None:
    def rec(seq: int) -> dict:
        return {"run_id": "r-1", "sequence": seq, "call_id": f"c{seq}", "turn": seq, "tool": "lookup_order",
                "arguments": ORDER_ARGS, "observation": ORDER_RESULT}

    a = write_ndjson(tmp_path / "a.ndjson", [rec(1), rec(2)])
    b = write_ndjson(tmp_path / "b.ndjson", [rec(3), {"record": "run", "run_id": "r-1", "termination_reason": "turn_limit"}])
    code, doc = audit_fast.json(a, b, policy=SEED_POLICY)
    run = only_run(doc)
    assert code == 1
    assert findings_of(run) == [("repeat", "stop", 1, 3, 3, "lookup_order")]
    assert run["score"]["termination_reason"] == "turn_limit"


def test_files_with_the_same_name_in_different_folders_are_different_runs(audit_fast, tmp_path: Path) -> None:
    def rec(seq: int, order: str) -> dict:
        return {"sequence": seq, "call_id": f"c{seq}", "tool": "lookup_order",
                "arguments": {"order_id": order}, "observation": {"status": "delivered"}}

    (tmp_path / "case1").mkdir()
    (tmp_path / "case2").mkdir()
    healthy = write_ndjson(tmp_path / "case1" / "trace.ndjson", [rec(1, "A1"), rec(2, "A2")])
    looping = write_ndjson(tmp_path / "case2" / "trace.ndjson", [rec(i, "B1") for i in range(1, 6)])

    code, doc = audit_fast.json(healthy, looping)
    assert len(doc["runs"]) == 2
    assert [r["outcome"] for r in doc["runs"]] == ["scored", "scored"]
    assert code == 1  # the looping case fails; it must not turn into an integrity_error (exit 3)


def test_a_span_delivered_twice_is_a_telemetry_duplicate_counted_once(audit_fast, tmp_path: Path) -> None:
    spans = record_agent(looping_agent(2), seed=21)
    request = to_request(spans)
    once = write_pb(tmp_path / "once.pb", request)
    twice_in_one_file = write_pb(tmp_path / "twice.pb", request, request)
    again_as_json = write_otlp_json(tmp_path / "again.json", request)

    _, base = audit_fast.json(once, policy=SEED_POLICY)
    base_run = only_run(base)
    assert findings_of(base_run) == []
    for files in ((twice_in_one_file,), (once, again_as_json)):
        code, doc = audit_fast.json(*files, policy=SEED_POLICY)
        run = only_run(doc)
        assert code == 0, files  # two lookups: within the allowance once deduplicated
        assert [f["kind"] for f in run["findings"]] == ["telemetry_duplicate", "telemetry_duplicate"]
        assert all(f["severity"] == "info" and f["count"] == 1 for f in run["findings"])
        assert sorted(f["first_seq"] for f in run["findings"]) == [1, 2]
        assert run["score"]["tool_calls"] == 2
        assert run["score"]["findings_by_kind"] == {"telemetry_duplicate": 2}
        base_score = {k: v for k, v in base_run["score"].items() if k != "findings_by_kind"}
        assert {k: v for k, v in run["score"].items() if k != "findings_by_kind"} == base_score


def test_spans_without_seq_are_ordered_by_start_time_not_file_position(audit_fast, tmp_path: Path) -> None:
    steps = [[Tool("lookup_order", {"order_id": "A12"}, ORDER_RESULT, f"s{i}")] for i in range(1, 4)] + [
        [Tool("lookup_order", {"order_id": f"B{i}"}, {"status": "pending", "version": i}, f"t{i}")] for i in range(1, 3)
    ]
    request = to_request(record_agent(steps, seed=5))
    mixed = shuffled(request, seed=3)

    def tool_call_ids(req) -> list[str]:
        out = []
        for span in req.resource_spans[0].scope_spans[0].spans:
            for kv in span.attributes:
                if kv.key == "gen_ai.tool.call.id":
                    out.append(kv.value.string_value)
        return out

    assert tool_call_ids(request) == ["s1", "s2", "s3", "t1", "t2"]
    assert tool_call_ids(mixed) != tool_call_ids(request)  # the shuffle really moved tool spans
    path = write_pb(tmp_path / "shuffled.pb", mixed)

    rows = call_rows(audit_fast(path, policy=SEED_POLICY).stdout)
    assert [(r[0], r[1]) for r in rows] == [("000001", "s1"), ("000002", "s2"), ("000003", "s3"), ("000004", "t1"), ("000005", "t2")]
    code, doc = audit_fast.json(path, policy=SEED_POLICY)
    assert code == 1
    assert findings_of(only_run(doc)) == [("repeat", "stop", 1, 3, 3, "lookup_order")]
    ordered = write_pb(tmp_path / "ordered.pb", request)
    assert findings_of(only_run(audit_fast.json(ordered, policy=SEED_POLICY)[1])) == findings_of(only_run(doc))


def test_loopguard_seq_on_spans_is_the_dispatch_order(audit_fast, tmp_path: Path) -> None:
    steps = healthy_agent()
    for seq, (tool,) in zip((3, 1, 2), steps):  # the processor numbered them at dispatch
        tool.attributes["loopguard.seq"] = seq
    path = write_pb(tmp_path / "numbered.pb", shuffled(to_request(record_agent(steps)), seed=1))
    rows = call_rows(audit_fast(path).stdout)
    assert [(r[0], r[1]) for r in rows] == [("000001", "c2"), ("000002", "c3"), ("000003", "c1")]


# --- run facts and guard decisions carried on spans -----------------------------------------


def test_guard_decision_and_run_facts_from_span_attributes(audit_fast, tmp_path: Path) -> None:
    denied = Tool("lookup_order", ORDER_ARGS, "not executed: loop guard", "call_03",
                  attributes={"loopguard.dispatched": False, "loopguard.guard": "repeat"})
    spans = record_agent(
        looping_agent(2) + [[denied]],
        root_attributes={"loopguard.termination_reason": "loop_guard", "loopguard.terminal_response": True},
    )
    code, doc = audit_fast.json(write_pb(tmp_path / "guarded.pb", to_request(spans)), policy=SEED_POLICY)
    score = only_run(doc)["score"]
    assert code == 0
    assert (score["tool_calls"], score["guard_fired"], score["guard_seq"], score["guard_before_dispatch"]) == (2, True, 3, True)
    assert score["termination_reason"] == "loop_guard" and score["terminal_response_emitted"] is True


def test_without_recorded_facts_the_termination_reason_stays_unknown(audit_fast, tmp_path: Path) -> None:
    spans = record_agent(looping_agent(6))
    _, doc = audit_fast.json(write_pb(tmp_path / "loop.pb", to_request(spans)))
    score = only_run(doc)["score"]
    assert score["termination_reason"] == "unknown" and score["terminal_response_emitted"] is None


def test_run_facts_from_ndjson_apply_to_a_run_whose_calls_are_otlp(audit_fast, tmp_path: Path) -> None:
    spans = record_agent(looping_agent(2), seed=9)
    pb = write_pb(tmp_path / "calls.pb", to_request(spans))
    facts = write_ndjson(tmp_path / "facts.ndjson", [
        {"record": "run", "run_id": trace_id_hex(spans), "termination_reason": "final_answer", "terminal_response": True}
    ])
    for files in ((pb, facts), (facts, pb)):
        score = only_run(audit_fast.json(*files)[1])["score"]
        assert score["termination_reason"] == "final_answer", files
        assert score["terminal_response_emitted"] is True


# --- integrity from OTLP ----------------------------------------------------------------------


def test_sequence_gap_in_processor_numbers_is_an_incomplete_trace(audit_fast, tmp_path: Path) -> None:
    steps = looping_agent(3)
    for seq, (tool,) in zip((1, 2, 4), steps):
        tool.attributes["loopguard.seq"] = seq
        tool.attributes["loopguard.seq.dense"] = True  # the processor's promise of 1..N
    code, doc = audit_fast.json(write_pb(tmp_path / "gap.pb", to_request(record_agent(steps))))
    run = only_run(doc)
    assert code == 3
    assert run["outcome"] == "incomplete_trace"
    assert [(f["kind"], f["first_seq"], f["last_seq"], f["count"]) for f in run["findings"]] == [("incomplete_trace", 3, 3, 1)]
    assert run["score"]["release"] is None


def test_a_span_that_never_ended_is_an_incomplete_trace(audit_fast, tmp_path: Path) -> None:
    request = to_request(record_agent(looping_agent(3)))
    tools = [s for s in request.resource_spans[0].scope_spans[0].spans if s.name.startswith("execute_tool")]
    tools[-1].end_time_unix_nano = 0  # exported while still open
    code, doc = audit_fast.json(write_pb(tmp_path / "open.pb", request))
    assert code == 3
    assert only_run(doc)["outcome"] == "incomplete_trace"


def test_same_span_id_with_different_content_is_an_integrity_error(audit_fast, tmp_path: Path) -> None:
    request = to_request(record_agent(looping_agent(3)))
    altered = type(request)()
    altered.CopyFrom(request)
    span = [s for s in altered.resource_spans[0].scope_spans[0].spans if s.name.startswith("execute_tool")][1]
    for kv in span.attributes:
        if kv.key == "gen_ai.tool.call.result":
            kv.value.string_value = json.dumps({"status": "lost", "version": 8})
    code, doc = audit_fast.json(write_pb(tmp_path / "a.pb", request), write_pb(tmp_path / "b.pb", altered))
    run = only_run(doc)
    assert code == 3
    assert run["outcome"] == "integrity_error"
    assert "integrity_conflict" in [f["kind"] for f in run["findings"]]


def test_digests_under_different_key_ids_in_one_run_are_an_integrity_error(audit_fast, tmp_path: Path) -> None:
    steps = looping_agent(3)
    for key_id, (tool,) in zip(("key-a", "key-b", "key-b"), steps):
        tool.attributes["loopguard.key.id"] = key_id
    code, doc = audit_fast.json(write_pb(tmp_path / "keys.pb", to_request(record_agent(steps))))
    run = only_run(doc)
    assert code == 3
    assert run["outcome"] == "integrity_error"
    assert any("key-a" in f["reason"] and "key-b" in f["reason"] for f in run["findings"])

    for _, (tool,) in zip(range(3), steps):
        tool.attributes["loopguard.key.id"] = "key-a"
    _, doc = audit_fast.json(write_pb(tmp_path / "one-key.pb", to_request(record_agent(steps))))
    assert only_run(doc)["outcome"] == "scored"


def test_format_is_detected_from_content_not_from_the_file_name(audit_fast, tmp_path: Path) -> None:
    request = to_request(record_agent(looping_agent(6)))
    pb = tmp_path / "dump.bin"
    pb.write_bytes(request.SerializeToString())
    js = write_otlp_json(tmp_path / "dump.txt", request)
    for path in (pb, js):
        code, doc = audit_fast.json(path)
        assert code == 1 and findings_of(only_run(doc)) == LOOP_FINDINGS
