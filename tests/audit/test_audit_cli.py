"""`otel-loopguard audit` as a real subprocess: text and JSON output, exit statuses 0/1/2/3.

CONTRACT.md section 3 and docs/audit.md. Every case runs the CLI with
OTEL_LOOPGUARD_KEY set, so digests are stable across invocations.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from audit_helpers import CALL_LINE, KEY, SEED_POLICY, findings_of, only_run, write_ndjson

A12 = {"order_id": "A12", "include_items": True}
DELIVERED = {"status": "delivered", "version": 7}


def lookup(seq: int, run: str = "order-A12", **extra) -> dict:
    return {
        "run_id": run,
        "sequence": seq,
        "call_id": f"call_{seq:02d}",
        "turn": seq,
        "tool": "lookup_order",
        "arguments": A12,
        "observation": DELIVERED,
        **extra,
    }


def looping(tmp_path: Path, name: str = "loop.ndjson", run: str = "order-A12", n: int = 3) -> Path:
    return write_ndjson(tmp_path / name, [lookup(i, run) for i in range(1, n + 1)])


def passing(tmp_path: Path, name: str = "ok.ndjson", run: str = "healthy") -> Path:
    return write_ndjson(
        tmp_path / name,
        [
            {"run_id": run, "sequence": 1, "call_id": "p1", "turn": 1, "tool": "search_cases",
             "arguments": {"query": "refund", "cursor": None}, "observation": {"items": [{"id": "case-1"}], "next": "p2"}},
            {"run_id": run, "sequence": 2, "call_id": "p2", "turn": 2, "tool": "search_cases",
             "arguments": {"query": "refund", "cursor": "p2"}, "observation": {"items": [{"id": "case-2"}], "next": None}},
            {"record": "run", "run_id": run, "termination_reason": "final_answer", "terminal_response": True},
        ],
    )


def gapped(tmp_path: Path, name: str = "gap.ndjson", run: str = "gappy") -> Path:
    # The run record promises numbers 1..N: only then is the missing 3 a missing call.
    dense = {"record": "run", "run_id": run, "dense_sequence": True}
    return write_ndjson(tmp_path / name, [lookup(1, run), lookup(2, run), lookup(4, run), dense])


# --- text output ------------------------------------------------------------------------


def test_text_lists_sequence_call_id_tool_and_digest_prefix_per_call(audit, tmp_path: Path) -> None:
    proc = audit(looping(tmp_path), policy=SEED_POLICY)

    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("RUN order-A12") and "outcome=scored" in lines[0] and "release=FAIL" in lines[0]
    rows = [m.groups() for m in map(CALL_LINE.match, lines) if m]
    assert [(seq, cid, tool, outcome) for seq, cid, tool, _, outcome in rows] == [
        ("000001", "call_01", "lookup_order", "ok"),
        ("000002", "call_02", "lookup_order", "ok"),
        ("000003", "call_03", "lookup_order", "ok"),
    ]
    digests = {row[3] for row in rows}
    assert len(digests) == 1  # the same action: the same keyed digest


def test_text_shows_findings_after_the_calls_then_the_score(audit, tmp_path: Path) -> None:
    out = audit(looping(tmp_path), policy=SEED_POLICY).stdout
    lines = out.splitlines()

    last_call = max(i for i, line in enumerate(lines) if CALL_LINE.match(line))
    findings_at = next(i for i, line in enumerate(lines) if line.strip().startswith("findings"))
    score_at = next(i for i, line in enumerate(lines) if line.strip().startswith("score:"))
    assert last_call < findings_at < score_at
    finding = lines[findings_at + 1]
    assert re.search(r"\bstop\s+repeat\s+seq 1-3\s+x3\b", finding), finding
    assert "repeat_threshold_crossed=true" in lines[score_at]
    assert "termination_reason=unknown" in lines[score_at]
    assert any("release rule broken:" in line and "[uncontained_loop]" in line for line in lines[score_at:])


def test_text_digest_prefix_is_the_keyed_digest_and_changes_with_the_key(audit, audit_fast, tmp_path: Path) -> None:
    path = looping(tmp_path)
    first = audit(path).stdout
    again = audit_fast(path).stdout  # another process, the same key
    audit.env["OTEL_LOOPGUARD_KEY"] = "another-key-0123456789abcdef"
    other = audit(path).stdout

    def digest(out: str) -> str:
        return next(m.group(4) for m in map(CALL_LINE.match, out.splitlines()) if m)

    assert digest(first) == digest(again)
    assert digest(first) != digest(other)
    for out in (first, other):
        assert KEY not in out and "another-key" not in out  # the key itself never appears


def test_text_reports_an_unscorable_run_without_a_score(audit, tmp_path: Path) -> None:
    proc = audit(gapped(tmp_path))

    assert proc.returncode == 3
    assert "outcome=incomplete_trace" in proc.stdout and "release=UNSCORABLE" in proc.stdout
    assert "incomplete_trace" in proc.stdout.split("findings", 1)[1]
    assert "score:" not in proc.stdout  # never reported with a clean score


# --- JSON output ------------------------------------------------------------------------


def test_json_is_exactly_one_document_of_the_contract_shape(audit, tmp_path: Path) -> None:
    proc = audit(looping(tmp_path), passing(tmp_path), gapped(tmp_path), policy=SEED_POLICY, fmt="json")

    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)  # raises if there is anything but one JSON document
    assert set(doc) == {"runs"}
    runs = {r["run_id"]: r for r in doc["runs"]}
    assert set(runs) == {"order-A12", "healthy", "gappy"}
    for run in doc["runs"]:
        assert {"run_id", "outcome", "findings", "score"} <= set(run)
        assert isinstance(run["run_id"], str)
        assert run["outcome"] in ("scored", "incomplete_trace", "integrity_error")
        assert isinstance(run["score"], dict)
        for f in run["findings"]:
            assert {"kind", "severity", "first_seq", "last_seq", "count", "tool"} <= set(f)
            assert f["severity"] in ("info", "warn", "stop")
            assert isinstance(f["first_seq"], int) and isinstance(f["last_seq"], int) and isinstance(f["count"], int)
    assert findings_of(runs["order-A12"]) == [("repeat", "stop", 1, 3, 3, "lookup_order")]
    assert runs["order-A12"]["score"]["release"]["passed"] is False
    assert runs["healthy"]["score"]["release"] == {"passed": True, "violations": []}
    assert runs["gappy"]["outcome"] == "incomplete_trace"
    assert runs["gappy"]["score"]["release"] is None


def test_json_and_text_agree(audit_fast, tmp_path: Path) -> None:
    path = looping(tmp_path, n=5)
    text = audit_fast(path).stdout
    run = only_run(json.loads(audit_fast(path, fmt="json").stdout))

    assert run["score"]["tool_calls"] == len([line for line in text.splitlines() if CALL_LINE.match(line)])
    # One line a loop (issue 29): the JSON lists every finding with its episode; the text shows
    # each episode's primary (its stop), the warn folded into it as "warned at call N".
    episodes: dict[int, list[dict[str, Any]]] = {}
    for f in run["findings"]:
        episodes.setdefault(f["episode"], []).append(f)
    finding_lines = [line for line in text.splitlines() if re.match(r"^    (info|warn|stop) ", line)]
    assert len(finding_lines) == len(episodes) == 1
    for found in episodes.values():
        primary = max(found, key=lambda f: ("info", "warn", "stop").index(f["severity"]))
        first, last = primary["first_seq"], primary["last_seq"]
        where = f"seq {first}-{last}" if first != last else f"seq {first}"
        assert re.search(rf"{primary['severity']}\s+{primary['kind']}\s+{where}\s+x{primary['count']}\b", text), text
    assert [(f["kind"], f["severity"]) for f in run["findings"]] == [
        ("repeat", "warn"), ("no_progress", "warn"), ("repeat", "stop")]
    assert "[warned at call 3; same calls: no_progress (warn)]" in finding_lines[0]
    assert "enforce mode would deny call 5: see docs/guard.md" in finding_lines[0]
    # What it cost: the five calls, all of the run (NDJSON records no model decisions: no tokens claimed).
    assert run["waste"]["calls"] == 5 and run["waste"]["share_calls"] == 1.0 and "tokens" not in run["waste"]
    assert re.search(r"^\s+cost: 5 calls \(100 % of the run\)", text, re.MULTILINE), text


# --- exit statuses ----------------------------------------------------------------------


def test_exit_0_when_every_run_passes(audit, tmp_path: Path) -> None:
    proc = audit(passing(tmp_path), passing(tmp_path, "ok2.ndjson", run="healthy-2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("release=PASS") == 2


def test_exit_1_when_a_run_fails_even_beside_passing_and_unscorable_runs(audit_fast, tmp_path: Path) -> None:
    proc = audit_fast(passing(tmp_path), gapped(tmp_path), looping(tmp_path), policy=SEED_POLICY)
    assert proc.returncode == 1


def test_exit_3_when_nothing_failed_but_a_run_is_unscorable(audit, tmp_path: Path) -> None:
    proc = audit(passing(tmp_path), gapped(tmp_path))
    assert proc.returncode == 3
    assert "release=PASS" in proc.stdout and "release=UNSCORABLE" in proc.stdout


def test_exit_3_for_an_integrity_error(audit_fast, tmp_path: Path) -> None:
    path = write_ndjson(tmp_path / "conflict.ndjson", [lookup(1), lookup(2), {**lookup(2), "call_id": "other"}])
    code, doc = audit_fast.json(path)
    assert code == 3
    assert only_run(doc)["outcome"] == "integrity_error"


def test_exit_3_when_no_tool_calls_were_found(audit, tmp_path: Path) -> None:
    empty = tmp_path / "empty.ndjson"
    empty.write_text("")
    proc = audit(empty, fmt="json")  # subprocess: the warning goes to stderr
    assert proc.returncode == 3
    assert json.loads(proc.stdout) == {"runs": []}
    assert "no tool calls" in proc.stderr


def test_text_ends_with_a_summary_of_runs_findings_release_rule_and_exit_status(audit, tmp_path: Path) -> None:
    proc = audit(looping(tmp_path, n=5), passing(tmp_path), policy=SEED_POLICY)
    assert proc.returncode == 1, proc.stderr
    tail = proc.stdout.splitlines()[-5:]
    assert tail[0] == "SUMMARY  runs: 2 (1 pass, 1 fail, 0 unscorable)"
    assert tail[1].startswith("  findings by kind: repeat ") and "stop)" in tail[1]
    assert tail[2].startswith("  loops cost: ") and " calls in 1 run" in tail[2]  # the looping run (issue 29)
    assert tail[3] == "  release rule: FAILS for order-A12"
    assert tail[4] == "  exit status: 1 (a run fails the release rule)"
    assert "NO TOOL CALLS" not in proc.stdout  # negative control: both files held calls


def test_text_says_which_file_held_no_tool_calls(audit, tmp_path: Path) -> None:
    empty = tmp_path / "spans-without-tools.json"
    empty.write_text('{"resourceSpans": []}')
    proc = audit(passing(tmp_path), empty, policy=SEED_POLICY)
    assert proc.returncode == 0, proc.stderr
    assert f"NO TOOL CALLS in {empty.name}" in proc.stdout or f"NO TOOL CALLS in {empty}" in proc.stdout
    assert "ok.ndjson" not in "".join(line for line in proc.stdout.splitlines() if line.startswith("NO TOOL CALLS"))
    assert proc.stdout.splitlines()[-2:] == ["  release rule: holds for every scored run",
                                             "  exit status: 0 (every run passes the release rule)"]
    alone = audit(empty)
    assert alone.returncode == 3
    assert alone.stdout.splitlines()[-2:] == [
        "  release rule: not applied: no run could be scored",
        "  exit status: 3 (nothing failed, but no run could be judged whole (unscorable, or no tool calls))"]


# --- exit 2: bad input, named precisely -------------------------------------------------


def _bad(audit, path: Path) -> str:
    proc = audit(path, fmt="json")
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""  # no partial document for a CI parser to misread
    return proc.stderr


def test_exit_2_missing_field_names_file_line_and_field(audit, tmp_path: Path) -> None:
    records = [lookup(1), lookup(2), lookup(3)]
    del records[1]["tool"]
    path = write_ndjson(tmp_path / "missing.ndjson", records)

    err = _bad(audit, path)
    assert f"{path}:2:" in err
    assert "missing field 'tool'" in err


@pytest.mark.parametrize("field", ["sequence", "call_id", "tool", "arguments", "observation"])
def test_every_required_field_is_checked(audit_fast, tmp_path: Path, field: str) -> None:
    records = [lookup(1), lookup(2), lookup(3)]
    del records[2][field]
    path = write_ndjson(tmp_path / "missing.ndjson", records)

    err = _bad(audit_fast, path)
    assert f"{path}:3: missing field '{field}'" in err


def test_exit_2_invalid_json_line_names_file_and_line(audit, tmp_path: Path) -> None:
    path = tmp_path / "broken.ndjson"
    path.write_text(json.dumps(lookup(1)) + "\n\n" + '{"sequence": 2, "call_id": "x",\n')

    err = _bad(audit, path)
    assert f"{path}:3:" in err and "not valid JSON" in err


def test_exit_2_wrong_type_names_file_line_and_field(audit, tmp_path: Path) -> None:
    path = write_ndjson(tmp_path / "typed.ndjson", [lookup(1), {**lookup(2), "sequence": "2"}])

    err = _bad(audit, path)
    assert f"{path}:2:" in err and "'sequence'" in err and "integer" in err


@pytest.mark.parametrize(
    "field,value",
    [("sequence", 0), ("sequence", True), ("sequence", 1.5), ("tool", 42), ("tool", ""), ("call_id", None),
     ("ok", "yes"), ("finished", "no"), ("dispatched", 1), ("turn", -1), ("run_id", ""), ("span_id", 7)],
)
def test_wrong_types_are_bad_input(audit_fast, tmp_path: Path, field: str, value) -> None:
    path = write_ndjson(tmp_path / "typed.ndjson", [lookup(1), {**lookup(2), field: value}])

    err = _bad(audit_fast, path)
    assert f"{path}:2:" in err and f"'{field}'" in err


def test_exit_2_unknown_termination_reason_on_a_run_record(audit_fast, tmp_path: Path) -> None:
    path = write_ndjson(
        tmp_path / "reason.ndjson",
        [lookup(1), {"record": "run", "run_id": "order-A12", "termination_reason": "looped"}],
    )
    err = _bad(audit_fast, path)
    assert f"{path}:2:" in err and "termination_reason" in err


def test_exit_2_line_that_is_not_an_object(audit_fast, tmp_path: Path) -> None:
    path = tmp_path / "array.ndjson"
    path.write_text(json.dumps(lookup(1)) + "\n" + "[1, 2]\n")
    assert f"{path}:2:" in _bad(audit_fast, path)


@pytest.mark.parametrize(
    "name,content",
    [
        ("notes.txt", b"hello world, these are not traces\n"),
        ("table.csv", b"sequence,call_id,tool\n1,c1,lookup_order\n"),
        ("array.json", b'[{"sequence": 1}]\n'),
        ("blob.bin", bytes(range(256))),
        ("ndjson-named.pb", (json.dumps(lookup(1)) + "\n").encode()),
    ],
)
def test_unknown_file_formats_are_bad_input(audit_fast, tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    err = _bad(audit_fast, path)
    assert str(path) in err


def test_exit_2_unknown_file_format(audit, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello world, these are not traces\n")
    err = _bad(audit, path)
    assert str(path) in err and "not NDJSON records, OTLP/JSON or an OTLP protobuf" in err


def test_exit_2_otlp_json_with_base64_ids_is_rejected_with_a_hint(audit_fast, tmp_path: Path) -> None:
    # The generic protobuf JSON mapping (base64 ids) is not OTLP/JSON (hex ids).
    from google.protobuf.json_format import MessageToDict

    from audit_agent_spans import looping_agent, record_agent, to_request

    path = tmp_path / "base64.json"
    path.write_text(json.dumps(MessageToDict(to_request(record_agent(looping_agent(2))))))
    err = _bad(audit_fast, path)
    assert str(path) in err and "hex" in err


def test_exit_2_for_a_protobuf_file_that_is_not_a_trace_request(audit_fast, tmp_path: Path) -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add()
    record.time_unix_nano = 1_700_000_000_000_000_000
    record.body.string_value = "tool lookup_order called"
    path = tmp_path / "logs.pb"
    path.write_bytes(request.SerializeToString())
    _bad(audit_fast, path)


def test_exit_2_unreadable_files(audit, audit_fast, tmp_path: Path) -> None:
    good = passing(tmp_path)
    missing = tmp_path / "nope.ndjson"
    err = _bad(audit, missing)
    assert "cannot read" in err and str(missing) in err

    folder = tmp_path / "folder.ndjson"
    folder.mkdir()
    proc = audit_fast(good, folder)
    assert proc.returncode == 2 and str(folder) in proc.stderr


@pytest.mark.parametrize(
    "text,expected",
    [
        ("repeat:\n  alowed_repeats: 2\n", "repeat.alowed_repeats"),
        ("repeat: [\n", "not valid YAML"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("tools:\n  issue_refund:\n    side_effect: 'yes'\n", "tools.issue_refund.side_effect"),
        ("repeat:\n  allowed_repeats: 0\n", "repeat.allowed_repeats"),
    ],
)
def test_bad_policy_files_name_the_file_and_key(audit_fast, tmp_path: Path, text: str, expected: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    proc = audit_fast(passing(tmp_path), policy=policy, fmt="json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert str(policy) in proc.stderr and expected in proc.stderr


def test_exit_2_bad_policy_file(audit, audit_fast, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("repeat:\n  alowed_repeats: 2\n")
    proc = audit(passing(tmp_path), policy=policy, fmt="json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert str(policy) in proc.stderr and "repeat.alowed_repeats: unknown key" in proc.stderr

    proc = audit_fast(passing(tmp_path), policy=tmp_path / "absent.yaml")
    assert proc.returncode == 2 and "absent.yaml" in proc.stderr


def test_exit_2_unusable_key_and_the_key_is_never_echoed(audit_fast, tmp_path: Path) -> None:
    audit_fast.env["OTEL_LOOPGUARD_KEY"] = "tiny-secret"
    proc = audit_fast(passing(tmp_path))
    assert proc.returncode == 2
    assert "too short" in proc.stderr and "tiny-secret" not in proc.stderr + proc.stdout


def test_a_bad_file_fails_the_audit_even_after_good_ones(audit_fast, tmp_path: Path) -> None:
    bad = write_ndjson(tmp_path / "bad.ndjson", [{k: v for k, v in lookup(1).items() if k != "tool"}])
    proc = audit_fast(passing(tmp_path), bad, fmt="json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"{bad}:1:" in proc.stderr


# --- exit 2, never 1, for input the readers cannot follow -------------------------------


def test_exit_2_for_json_nested_deeper_than_json_can_read(audit, audit_fast, tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    line = json.dumps(lookup(1))[:-1] + ', "extra": ' + deep + "}"
    path = tmp_path / "deep.ndjson"
    path.write_text(line + "\n")
    assert f"{path}:1: JSON nested too deeply" in _bad(audit, path)

    otlp = tmp_path / "deep.json"
    otlp.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": ' + deep + "}]}]}]}")
    assert "nested too deeply" in _bad(audit_fast, otlp)


def test_arguments_nested_as_deep_as_json_reads_are_still_judged(audit_fast, tmp_path: Path) -> None:
    deep = json.loads("[" * 900 + "]" * 900)
    path = write_ndjson(tmp_path / "deep-args.ndjson", [lookup(i, arguments={"q": deep}) for i in range(1, 6)])
    code, report = audit_fast.json(path)
    assert code == 1 and findings_of(only_run(report))  # five identical deep calls: a stopped repeat, as with shallow ones


def test_exit_2_for_a_policy_file_that_is_not_utf8(audit, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_bytes("repeat:\n  # caf\u00e9\n  warn_at: 3\n".encode("latin-1"))
    proc = audit(passing(tmp_path), policy=policy, fmt="json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert str(policy) in proc.stderr and "not UTF-8" in proc.stderr and "Traceback" not in proc.stderr


def test_an_ndjson_file_with_a_byte_order_mark_is_read(audit_fast, tmp_path: Path) -> None:
    path = looping(tmp_path, n=5)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    code, report = audit_fast.json(path)
    assert code == 1 and findings_of(only_run(report))


def test_a_truncated_pretty_printed_otlp_json_file_names_where_it_breaks(audit_fast, tmp_path: Path) -> None:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1",
                                                         "name": f"span {i}"} for i in range(40)]}]}]}
    text = json.dumps(doc, indent=2)
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    err = _bad(audit_fast, path)
    assert "line 1 column" not in err and re.search(r"line \d{2,} column", err), err


def test_a_long_key_pasted_as_the_key_file_is_bad_input_and_never_echoed(audit, tmp_path: Path) -> None:
    pasted = "pasted-passphrase-" + "k" * 300
    proc = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "audit", str(passing(tmp_path)),
                           "--key-file", pasted], capture_output=True, text=True, env=audit.env, cwd=tmp_path,
                          timeout=60)
    assert proc.returncode == 2 and "pasted-passphrase" not in proc.stderr + proc.stdout
    assert "key file" in proc.stderr


def test_an_internal_error_is_exit_2_not_the_fail_status(audit_fast, tmp_path: Path, monkeypatch) -> None:
    from otel_loopguard.audit import command

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(command, "read_inputs", broken)
    proc = audit_fast(passing(tmp_path))
    assert proc.returncode == 2 and "internal error (KeyError)" in proc.stderr
