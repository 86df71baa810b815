"""The receiver's decode, twice: the Rust decoder (receiver/ingest/decode_native.py over native/src/otlp.rs)
against the Python reference (decode.decode_python over protobuf's parser). On recorded captures,
generated requests, seeded and mutated bytes and hand-made wire edge cases, both give the same
records (every field of every Decoded, calls included), the same rejections, and the same error
type and message."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from tiers import cases, examples
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData

from otel_loopguard import native
from otel_loopguard.otlp.values import to_key_values
from otel_loopguard.receiver.ingest import decode as reference
from otel_loopguard.receiver.ingest import decode_native, scans

from tests.native.conftest import require_native
from tests.reliability.fuzzing import RUN_ATTRIBUTE, corpus, mutate, random_request, requests

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "research" / "conventions" / "captures"
FIXTURES = ROOT / "tests" / "fixtures" / "otlp"
FIELDS = ("where", "key", "content", "trace_id", "span_id", "parent", "start", "end", "run_id", "call", "model",
          "facts", "guards", "agent", "tree")
Decoder = Callable[..., Any]
# LOOPGUARD_DECODE_DIFF_CASES raises the mutated cases for a long run (docs/testing.md, "Long runs");
# the seeded requests scale with it (a tenth, each whole and mutated).
MUTATED = int(os.environ.get("LOOPGUARD_DECODE_DIFF_CASES", cases(20000)))
SEEDED = max(cases(1000), MUTATED // 10)


@pytest.fixture(scope="module")
def rust() -> Decoder:
    require_native()  # before the module's decoder is made (autouse fixtures are per test)
    return decode_native.decoder(native.module())


def outcome(decode: Decoder, data: bytes, run_attr: Optional[str], max_spans: Optional[int]) -> str:
    """Everything a decode answers, as text (repr: NaN in a payload equals itself there)."""
    try:
        got = decode(data, run_attr, max_spans)
    except Exception as exc:  # the type and message are what the service turns into its answer
        return f"raised {type(exc).__module__}.{type(exc).__name__}: {exc}"
    return repr(([tuple(getattr(d, f) for f in FIELDS) for d in got.spans], got.rejected))


def check(rust: Decoder, data: bytes, run_attr: Optional[str] = RUN_ATTRIBUTE, max_spans: Optional[int] = 64) -> str:
    python = outcome(reference.decode_python, data, run_attr, max_spans)
    assert outcome(rust, data, run_attr, max_spans) == python, f"the decoders differ on {data.hex()}"
    return python


# -- the schema -------------------------------------------------------------------------
def _len_fields(descriptor: Any, seen: dict[str, set[tuple[int, str]]]) -> None:
    if descriptor.name in seen:
        return
    seen[descriptor.name] = set()
    for f in descriptor.fields:
        if f.type == f.TYPE_STRING:
            seen[descriptor.name].add((f.number, "str"))
        elif f.type == f.TYPE_BYTES:
            seen[descriptor.name].add((f.number, "bytes"))
        elif f.type == f.TYPE_MESSAGE:
            seen[descriptor.name].add((f.number, f"message:{f.message_type.name}"))
            _len_fields(f.message_type, seen)


def test_the_readers_schema_is_protobufs() -> None:
    """Every length-delimited field of the installed trace.proto (and what it includes) is in
    the Rust reader's schema, as a string, bytes or the same message: a protobuf upgrade
    that adds a string field fails here, not silently in UTF-8 checks."""
    expected: dict[str, set[tuple[int, str]]] = {}
    _len_fields(TracesData.DESCRIPTOR, expected)
    got: dict[str, set[tuple[int, str]]] = {}
    for message, field, kind in native.module().otlp_schema():
        got.setdefault(message, set()).add((field, kind))
    assert got == {name: fields for name, fields in expected.items() if fields}


# -- recorded captures --------------------------------------------------------------------
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def _captured_span(s: dict[str, Any]) -> Span:
    base = 1_700_000_000_000_000_000
    return Span(
        trace_id=bytes.fromhex(s["trace_id"]), span_id=bytes.fromhex(s["span_id"]),
        parent_span_id=bytes.fromhex(s.get("parent_span_id") or ""), name=s["name"],
        start_time_unix_nano=base + int(s["start_ms"] * 1e6), end_time_unix_nano=base + int(s["end_ms"] * 1e6),
        attributes=to_key_values(s["attributes"]),
        events=[Span.Event(name=e["name"], time_unix_nano=base, attributes=to_key_values(e.get("attributes", {})))
                for e in s.get("events", [])],
        status={"code": _STATUS[s["status"]["code"]], "message": s["status"].get("description") or ""})


def recorded() -> list[tuple[str, bytes]]:
    """Every committed capture (research/conventions/captures, handoffs included) as one request,
    and the committed OTLP protobuf fixtures as they are."""
    out = []
    for path in sorted(CAPTURES.rglob("*.json")):
        spans = [_captured_span(s) for s in json.loads(path.read_text())["spans"]]
        request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
        out.append((path.name, request.SerializeToString()))
    out += [(path.name, path.read_bytes()) for path in sorted(FIXTURES.glob("*.pb"))]
    return out


def test_recorded_captures_decode_alike(rust: Decoder) -> None:
    cases = recorded()
    assert len(cases) >= 40, len(cases)
    calls = models = 0
    for name, data in cases:
        for run_attr in (None, RUN_ATTRIBUTE):
            check(rust, data, run_attr, None)
        got = rust(data)
        calls += sum(d.call is not None for d in got.spans)
        models += sum(d.model is not None for d in got.spans)
    # the captures reach the paths that matter: tool calls (handoffs among them) and model calls
    assert calls > 200 and models > 100, (calls, models)


# -- generated, seeded and mutated requests -------------------------------------------------
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                  HealthCheck.function_scoped_fixture])
@given(requests)
def test_generated_requests_decode_alike(rust: Decoder, data: bytes) -> None:
    check(rust, data)
    check(rust, data, None, None)


def test_seeded_requests_whole_and_mutated_decode_alike(rust: Decoder) -> None:
    rnd = random.Random(17)
    for _ in range(SEEDED):
        data = random_request(rnd)
        check(rust, data)
        check(rust, mutate(data, rnd))


def test_mutated_agent_requests_decode_alike(rust: Decoder) -> None:
    rnd = random.Random(1717)
    seeds = corpus()
    seen: dict[str, int] = {}
    for _ in range(MUTATED):
        got = check(rust, mutate(rnd.choice(seeds), rnd))
        kind = got.split(": ", 2)[-1] if got.startswith("raised") else "accepted"
        seen[kind] = seen.get(kind, 0) + 1
    # every kind of refusal was met, and accepted requests too
    assert {"Wire format was corrupt", "String field had bad UTF-8", "accepted"} <= set(seen), seen


def test_random_bytes_decode_alike(rust: Decoder) -> None:
    rnd = random.Random(99)
    for _ in range(5000):
        check(rust, rnd.randbytes(rnd.randrange(40)))


# -- wire edge cases ---------------------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            return bytes(out + bytes([b]))
        out.append(b | 0x80)


def _ld(field: int, body: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(body)) + body


def _vi(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _kv(key: bytes, *values: bytes, extra: bytes = b"") -> bytes:
    return _ld(1, key) + b"".join(_ld(2, v) for v in values) + extra


def _span(*attrs: bytes, rest: bytes = b"") -> bytes:
    return _ld(1, b"\x01" * 16) + _ld(2, b"\x02" * 8) + _ld(5, b"execute_tool t") + b"".join(_ld(9, a) for a in attrs) + rest


def _request(*spans: bytes, after: bytes = b"") -> bytes:
    return _ld(1, _ld(2, b"".join(_ld(2, s) for s in spans))) + after


TOOL = _kv(b"gen_ai.operation.name", _ld(1, b"execute_tool"))
NAME = _kv(b"gen_ai.tool.name", _ld(1, b"lookup"))


def _nested_arrays(n: int, inner: bytes = b"") -> bytes:
    value = inner
    for _ in range(n):
        value = _ld(5, _ld(1, value))
    return value


EDGE_CASES = {
    "array merged from two value fields": _request(_span(TOOL, NAME, _kv(
        b"gen_ai.tool.call.arguments", _ld(5, _ld(1, _ld(1, b"a"))), _ld(5, _ld(1, _vi(3, 7)))))),
    "array then string then array": _request(_span(TOOL, NAME, _kv(
        b"gen_ai.tool.call.arguments", _ld(5, _ld(1, _ld(1, b"a"))), _ld(1, b"s"), _ld(5, _ld(1, _ld(1, b"b")))))),
    "oneof switched in one message": _request(_span(TOOL, NAME, _kv(
        b"gen_ai.tool.call.result", _ld(1, b"x") + _vi(2, 1) + _vi(8, 5)))),
    "string_value_strindex as a marker": _request(_span(_kv(b"gen_ai.operation.name", _vi(8, 3)), NAME)),
    "key_strindex beside a key": _request(_span(TOOL, _kv(b"gen_ai.tool.name", _ld(1, b"x"), extra=_vi(3, 9)))),
    "a key given twice in one entry": _request(_span(TOOL, _ld(1, b"other") + _kv(b"gen_ai.tool.name", _ld(1, b"y")))),
    "an entry without a value": _request(_span(TOOL, _ld(1, b"gen_ai.tool.name"))),
    "an entry of unknown fields only": _request(_span(TOOL, NAME, _vi(7, 1) + b"\x2b\x2c")),
    "a key repeated across entries": _request(_span(TOOL, NAME, _kv(b"gen_ai.tool.name", _ld(1, b"second")))),
    "two status fields merged": _request(_span(TOOL, NAME, rest=_ld(15, _vi(3, 2)) + _ld(15, _ld(2, b"m")))),
    "a negative status code": _request(_span(TOOL, NAME, rest=_ld(15, _vi(3, 2**64 - 2)))),
    "times given twice and of the wrong wire type": _request(_span(
        TOOL, NAME, rest=b"\x39" + bytes(8) + b"\x39" + b"\x01" * 8 + _vi(8, 5))),
    "a deep kvlist cut at depth 32": _request(_span(TOOL, NAME, _kv(
        b"gen_ai.tool.call.arguments", _nested_arrays(40, _ld(1, b"leaf"))))),
    "101 levels deep": _request(_span(_kv(b"k", _nested_arrays(47, _ld(5, b""))))),
    "102 levels deep": _request(_span(_kv(b"k", _nested_arrays(48)))),
    "102 levels deep, overrunning its parent": _request(_span(_kv(b"k", _nested_arrays(47, _ld(5, b"\x0a\x05")))),
                                                        after=b"\x2a\x00" * 5),
    "100 groups at the top": b"\x2b" * 100 + b"\x2c" * 100,
    "101 groups at the top": b"\x2b" * 101 + b"\x2c" * 101,
    "groups under a span": _request(_span(TOOL, NAME, rest=b"\x83\x01" * 90 + b"\x84\x01" * 90)),
    "a group of a message field": _request(_span(TOOL, NAME, rest=b"\x7b\x7c")),
    "a string overrunning its entry, bad UTF-8 after": _request(_span(TOOL, b"\x0a\x05ab", rest=_ld(5, b"\xff\xfe"))),
    "a string overrunning its entry, good UTF-8 after": _request(_span(TOOL, b"\x0a\x05ab", rest=_ld(5, b"cdef"))),
    "a string overrunning the request": _ld(1, b"\x1a\x09ab"),
    "bad UTF-8 in an unknown field": _request(_span(TOOL, NAME, rest=_ld(99, b"\xff"))),
    "bad UTF-8 in a resource attribute": _ld(1, _ld(1, _ld(1, _kv(b"k", _ld(1, b"\xc0\x80"))))),
    "a surrogate in a span name": _request(_span(TOOL, NAME, rest=_ld(5, b"\xed\xa0\x80"))),
    "an end-group tag at the top": b"\x0c",
    "a tag of six bytes": b"\xf8\xff\xff\xff\x8f\x00",
    "a tag above 32 bits": b"\xf8\xff\xff\xff\x1f\x00",
    "a varint of eleven bytes": b"\x10" + b"\xff" * 10 + b"\x01",
    "a varint of ten bytes": b"\x10" + b"\xff" * 9 + b"\x7f",
    "field number zero": b"\x02\x00",
    "wire type 7": b"\x0f",
    "a decision event": _request(_span(TOOL, NAME, _kv(b"loopguard.run.id", _ld(1, b"run-1")), rest=_ld(11, (
        b"\x09" + bytes(8) + _ld(2, b"loopguard.decision") + _ld(3, _kv(b"loopguard.decision", _ld(1, b"deny")))
        + _ld(3, _kv(b"loopguard.dispatched", _vi(2, 0))) + _ld(3, _kv(b"loopguard.finding.kind", _ld(1, b"repeat"))))))),
    "zero and short ids": _request(_ld(1, bytes(16)) + _ld(2, b"\x02" * 8), _ld(1, b"\x01" * 16) + _ld(2, b"\x02" * 7),
                                   _span(rest=_ld(4, b"\x03" * 3))),
    "a langgraph command result": _request(_span(_kv(b"traceloop.span.kind", _ld(1, b"tool")), _kv(
        b"traceloop.entity.output", _ld(1, b'{"output": {"graph": "__parent__", "goto": "b"}}')),
        _kv(b"traceloop.association.properties.lc_agent_name", _ld(1, b"a")))),
    "our own finding span": _request(_span(TOOL, NAME, rest=_ld(5, b"loopguard.finding repeat/stop t"))),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_wire_edge_cases_decode_alike(rust: Decoder, name: str) -> None:
    got = check(rust, EDGE_CASES[name])
    check(rust, EDGE_CASES[name], None, None)
    # the cases are what their names say (so a change of the reference shows here too)
    if "102 levels deep" == name:
        assert got.endswith("Exceeded upb_DecodeOptions_MaxDepth")
    if "bad UTF-8" in name and "unknown" not in name:
        assert got.endswith("String field had bad UTF-8")
    if name in ("101 groups at the top", "a tag of six bytes", "field number zero", "an end-group tag at the top"):
        assert got.endswith("Wire format was corrupt")
    if name in ("101 levels deep", "100 groups at the top", "a decision event", "array merged from two value fields"):
        assert not got.startswith("raised")


def test_too_many_spans_alike(rust: Decoder) -> None:
    data = _request(*[_span(TOOL, NAME)] * 5)
    got = check(rust, data, None, 4)
    assert "TooManySpans" in got and "5 spans" in got
    assert not check(rust, data, None, 5).startswith("raised")


def test_a_span_that_cannot_be_judged_is_passed_on_alike(rust: Decoder, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A fault while judging one span costs that span its judging, on both paths, alike."""
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a fault in the conventions")

    monkeypatch.setattr(reference, "recognise", broken)
    data = _request(_span(TOOL, NAME), _ld(1, b"\x01" * 16) + _ld(2, b"\x05" * 8) + _ld(5, b"chain"))
    with caplog.at_level(logging.ERROR, logger="otel_loopguard.receiver"):
        got = check(rust, data)
    assert "could not be read" in caplog.text
    assert "RawCall" not in got


def test_the_comparison_can_fail(rust: Decoder) -> None:
    """Negative control: a native decoder one field off, or with another message, is caught."""
    data = _request(_span(TOOL, NAME))

    def off_by_one(*args: Any) -> Any:
        got = rust(*args)
        got.spans[0].end += 1
        return got

    with pytest.raises(AssertionError, match="the decoders differ"):
        check(off_by_one, data)

    def reworded(*args: Any) -> Any:
        raise reference.TooManySpans(2, 1)

    with pytest.raises(AssertionError, match="the decoders differ"):
        check(reworded, b"\x0c")


def _child_path(env: dict[str, str]) -> str:
    code = "from otel_loopguard.receiver.ingest import decode; print(decode.path())"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=True).stdout.strip()


@pytest.mark.real  # starts a process
def test_one_chooser_for_both_native_paths() -> None:
    """decode() takes the Rust path exactly when native.py does:
    OTEL_LOOPGUARD_PURE_PYTHON=1 sends both to Python."""
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    assert _child_path(env) == "native"
    assert _child_path({**env, native.PURE_ENV: "1"}) == "python"
    assert reference.path() == "native"  # this process runs the native path


# -- keys found by shape: an OpenInference LLM span's record of the conversation (scans.py) ----------
FW_CAPTURES = ROOT / "research" / "conventions" / "fw_captures"
_LLM = {"openinference.span.kind": "LLM", "llm.model_name": "m"}


def _call_id_key(message: int, call: int, side: str = "input") -> str:
    return f"llm.{side}_messages.{message}.message.tool_calls.{call}.tool_call.id"


def _record_request(attrs: list[tuple[str, Any]]) -> bytes:
    """One span with these attributes, in this order (repeats kept: the last one wins)."""
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="llm", start_time_unix_nano=1, end_time_unix_nano=2)
    for key, value in attrs:
        span.attributes.extend(to_key_values({key: value}))
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])]
                                     ).SerializeToString()


def _model(rust: Decoder, attrs: list[tuple[str, Any]]) -> Any:
    data = _record_request(attrs)
    check(rust, data)
    check(rust, data, None, None)
    return rust(data).spans[0].model


def test_framework_captures_decode_alike_and_the_enclosing_model_spans_keep_their_record(rust: Decoder) -> None:
    records = {}
    for path in sorted(FW_CAPTURES.glob("*.json")):
        spans = [_captured_span(s) for s in json.loads(path.read_text())["spans"]]
        data = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
                                         ).SerializeToString()
        check(rust, data, None, None)
        records[path.stem] = [d.model.requested for d in rust(data).spans if d.model is not None]
    # ADK + OpenInference: its one LLM span records the calls its messages asked for
    assert records["adk_openinference__repeat"] == [{"c1": 2, "c2": 4, "c3": 6, "c4": 8, "c5": 10}]
    assert records["adk_openinference__repeat__content-off"][0]
    # Negative control: GenAI model spans (no OpenInference marker) keep none
    assert records["pai_otel_genai__repeat"] and not any(records["pai_otel_genai__repeat"])


def test_a_record_is_read_alike_whatever_the_order_of_its_keys(rust: Decoder) -> None:
    keys = [(_call_id_key(i, 0), f"call-{i}") for i in range(6)] + [(_call_id_key(6, 0, "output"), "call-6")]
    rnd = random.Random(3)
    seen = set()
    for _ in range(5):
        rnd.shuffle(keys)
        model = _model(rust, [*_LLM.items(), *keys, ("llm.input_messages.0.message.content", "hi")])
        seen.add(tuple(sorted(model.requested.items())))
    assert seen == {tuple(sorted({**{f"call-{i}": i for i in range(6)}, "call-6": 12}.items()))}  # an answer after the inputs


def test_a_record_repeated_keys_and_other_values_alike(rust: Decoder) -> None:
    model = _model(rust, [*_LLM.items(), (_call_id_key(0, 0), "first"), (_call_id_key(0, 0), "last"),
                          (_call_id_key(1, 0), 7), (_call_id_key(2, 0), ""), ("x.tool_call.id", "other"),
                          ("llm.input_messages.3.message.tool_calls.0.tool_call.name", "not an id")])
    assert model.requested == {"last": 0}


def test_a_record_past_the_cap_is_dropped_alike(rust: Decoder) -> None:
    cap = scans.MAX_SCANNED
    at_cap = _model(rust, [*_LLM.items(), *[(_call_id_key(i, 0), f"c{i}") for i in range(cap)]])
    assert len(at_cap.requested) == cap and at_cap.span_id == "02" * 8
    past = _model(rust, [*_LLM.items(), *[(_call_id_key(i, 0), f"c{i}") for i in range(cap + 1)]])
    assert past.requested is None and past.span_id is None  # its calls keep the turns their times give


def test_only_openinference_llm_spans_are_scanned(rust: Decoder) -> None:
    record = [(_call_id_key(0, 0), "c0")]
    genai = _model(rust, [("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "m"), *record])
    assert genai is not None and genai.requested is None and genai.span_id is None
    # an OpenInference span of another kind: none of its keys is read
    data = _record_request([("openinference.span.kind", "CHAIN"), *record])
    assert "c0" not in check(rust, data)
    # the ADK shape: GenAI and OpenInference keys on one span; it is scanned
    both = _model(rust, [("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "m"), *_LLM.items(), *record])
    assert both.requested == {"c0": 0}


def test_a_managers_list_and_the_span_tree_are_read_alike(rust: Decoder) -> None:
    """An OpenInference AGENT span's managed agents (scans.DECLARED) and every OpenInference
    span's kind (receiver/runs/buffer.py keeps the tree): both decoders, to the cap and past it."""
    def agent(count: int) -> Any:
        data = _record_request([("openinference.span.kind", "AGENT"), ("input.value", '{"task": "t"}'),
                                *[(f"smolagents.managed_agents.{i}.name", f"a{i}") for i in range(count)]])
        check(rust, data)
        return rust(data).spans[0].tree

    at_cap = agent(scans.MAX_DECLARED)
    assert len(at_cap.declared) == scans.MAX_DECLARED and at_cap.kind == "agent"
    assert agent(scans.MAX_DECLARED + 1).declared == frozenset()  # dropped whole: no manager
    chain = rust(_record_request([("openinference.span.kind", "CHAIN")])).spans[0].tree
    assert chain is not None and chain.kind == "other" and chain.candidate is None
    # Negative control: a kind OpenInference does not define is no link (the walk stops there)
    unknown = _record_request([("openinference.span.kind", "SOMETHING")])
    check(rust, unknown)
    assert rust(unknown).spans[0].tree is None
