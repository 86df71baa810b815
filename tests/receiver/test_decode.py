"""The receiver's reduced decode reads exactly what the full parse reads.

decode() looks at a handful of attributes through a map view of the wire bytes;
the audit's SpanCollector parses everything. On every span real instrumentations
emitted (research/conventions/captures) both must yield the same tool calls,
model calls and run ids, whatever else the spans carry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from tiers import examples
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from otel_loopguard.conventions import ModelSpan, ToolSpan, recognise
from otel_loopguard.otlp.spans import run_id_of, span_call
from otel_loopguard.otlp.wire import _field
from otel_loopguard.otlp.values import attributes, to_any_value, to_key_values
from otel_loopguard.receiver.ingest.decoder import decode

CAPTURES = Path(__file__).resolve().parents[2] / "research" / "conventions" / "captures"
FILES = sorted(p.stem for p in CAPTURES.glob("*.json"))
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def _span(s: dict[str, Any]) -> Span:
    return Span(
        trace_id=bytes.fromhex(s["trace_id"]), span_id=bytes.fromhex(s["span_id"]),
        parent_span_id=bytes.fromhex(s.get("parent_span_id") or ""), name=s["name"],
        start_time_unix_nano=1 + int(s["start_ms"] * 1e6), end_time_unix_nano=1 + int(s["end_ms"] * 1e6),
        attributes=to_key_values(s["attributes"]),
        status=Status(code=_STATUS[s["status"]["code"]]),
    )


def _request(spans: list[Span]) -> bytes:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString()


def _full(span: Span, run_attr: str | None) -> tuple[Any, Any, str]:
    """What the full parse makes of a span: (RawCall or None, ModelSpan or None, run id)."""
    attrs = attributes(span.attributes)
    found = recognise(attrs, span.status.code == Status.STATUS_CODE_ERROR)
    call = span_call(span, attrs, found) if isinstance(found, ToolSpan) else None
    model = found if isinstance(found, ModelSpan) else None
    return call, model, run_id_of(attrs, span.trace_id, run_attr)


@pytest.mark.skipif(not FILES, reason="research captures not present")
@pytest.mark.parametrize("name", FILES)
def test_reduced_decode_matches_the_full_parse_on_real_spans(name: str) -> None:
    spans = [_span(s) for s in json.loads((CAPTURES / f"{name}.json").read_text())["spans"]]
    decoded = decode(_request(spans)).spans
    assert len(decoded) == len(spans)
    tools = models = 0
    for span, d in zip(spans, decoded):
        call, model, run_id = _full(span, None)
        assert d.call == call, span.name
        assert (d.model is None) == (model is None), span.name
        if model is not None:
            assert (d.model.model, d.model.input_tokens, d.model.output_tokens) == (
                model.model, model.input_tokens, model.output_tokens)
        if call is not None or model is not None:
            assert d.run_id == run_id
        tools += call is not None
        models += model is not None
    assert tools and models  # every capture has both: a capture that lost them is a broken fixture


def _kv(key: str, value: Any) -> KeyValue:
    return KeyValue(key=key, value=to_any_value(value))


def _one(attrs: dict[str, Any], status: int = 0) -> Any:
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, start_time_unix_nano=1, end_time_unix_nano=2,
                attributes=[_kv(k, v) for k, v in attrs.items()], status=Status(code=status))
    return decode(_request([span])).spans[0]


def test_a_tool_marker_wins_over_a_model_marker_as_in_recognise() -> None:
    d = _one({"openinference.span.kind": "LLM", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    assert d.call is not None and d.call.tool == "t" and d.model is None


def test_a_tagged_tool_wins_over_a_model_marker() -> None:
    d = _one({"gen_ai.operation.name": "chat", "loopguard.tool.name": "t", "loopguard.seq": 1})
    assert d.call is not None and d.call.tool == "t"


def test_a_marker_key_with_another_value_or_type_is_not_read() -> None:
    assert _one({"gen_ai.operation.name": "execute_task", "gen_ai.tool.name": "t"}).call is None
    assert _one({"gen_ai.operation.name": ["execute_tool"], "gen_ai.tool.name": "t"}).call is None
    assert _one({"openinference.span.kind": "CHAIN"}).model is None


def test_unrelated_attributes_do_not_change_what_is_read() -> None:
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": '{"a": 1}'}
    noisy = {**{f"app.attr.{i}": "x" * 50 for i in range(300)}, **base, "odd": [1, "two", 3.0]}
    assert _one(noisy).call == _one(base).call


def test_run_facts_alone_make_a_span_worth_reading() -> None:
    d = _one({"loopguard.termination_reason": "max_turns", "loopguard.terminal_response": False})
    assert d.facts == {"loopguard.termination_reason": "max_turns", "loopguard.terminal_response": False}
    assert d.run_id == (b"\x01" * 16).hex()


def test_content_id_tells_a_re_delivery_from_a_different_span() -> None:
    a = _one({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    again = _one({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    other = _one({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "u"})
    errored = _one({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}, status=2)
    assert a.key == again.key == other.key == errored.key
    assert a.content == again.content
    assert len({a.content, other.content, errored.content}) == 3


def _framed(raw_span: bytes) -> bytes:
    """A request around one span's raw bytes: resource_spans(1) > scope_spans(2) > spans(2)."""
    return _field(0x0A, _field(0x12, _field(0x12, raw_span)))


def _reencoded(span: Span) -> bytes:
    """The same span as another encoder may write it: empty status spelled out, fields reordered."""
    body = Span()
    body.CopyFrom(span)
    body.ClearField("attributes")
    attrs = b"".join(_field(0x4A, kv.SerializeToString()) for kv in reversed(span.attributes))
    return attrs + body.SerializeToString() + b"\x7a\x00"  # status {} (field 15, empty)


def test_a_re_delivery_through_another_encoder_is_still_a_duplicate() -> None:
    for attrs in ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": "{}"},
                  {"http.method": "GET", "x": 1}):
        span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="s", start_time_unix_nano=1,
                    end_time_unix_nano=2, attributes=[_kv(k, v) for k, v in attrs.items()])
        first, second = decode(_request([span])).spans[0], decode(_framed(_reencoded(span))).spans[0]
        assert first.key == second.key and first.content == second.content
        assert first.call == second.call


def test_a_keyvalue_with_a_field_newer_than_ours_is_still_read() -> None:
    """upb cannot keep such an entry in the map view; the full parse reads it instead."""
    kv = _kv("gen_ai.operation.name", "execute_tool").SerializeToString() + b"\x18\x05"  # unknown field 3
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="s", start_time_unix_nano=1, end_time_unix_nano=2,
                attributes=[_kv("gen_ai.tool.name", "lookup")])
    d = decode(_framed(span.SerializeToString() + _field(0x4A, kv))).spans[0]
    assert d.call is not None and d.call.tool == "lookup"


def test_a_hidden_attribute_is_read_in_wire_order_last_one_wins() -> None:
    """The full parse of such a span reads its KeyValues as the wire has them, as the audit does."""
    hidden = _kv("gen_ai.tool.name", "hidden").SerializeToString() + b"\x18\x05"  # unknown field 3
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="s", start_time_unix_nano=1, end_time_unix_nano=2,
                attributes=[_kv("gen_ai.operation.name", "execute_tool")])
    raw = span.SerializeToString() + _field(0x4A, hidden) + _field(0x4A, _kv("gen_ai.tool.name", "visible").SerializeToString())
    d = decode(_framed(raw)).spans[0]
    assert d.call is not None and d.call.tool == "visible"
    assert d.call == _full(Span.FromString(raw), None)[0]


def test_non_finite_token_counts_count_as_unknown_and_lose_nothing() -> None:
    d = _one({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": float("nan"),
              "gen_ai.usage.output_tokens": float("inf")})
    assert d.model is not None and (d.model.input_tokens, d.model.output_tokens) == (0, 0)


def test_a_span_that_cannot_be_read_is_passed_on_unjudged(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_loopguard.receiver.ingest import decode as module

    real = module.recognise

    def fragile(values: Any, error: bool) -> Any:
        if values.get("gen_ai.tool.name") == "boom":
            raise ValueError("a bug")
        return real(values, error)

    monkeypatch.setattr(module, "recognise", fragile)
    spans = [Span(trace_id=b"\x01" * 16, span_id=bytes([0, 0, 0, 0, 0, 0, 0, n]), name="s", start_time_unix_nano=1,
                  end_time_unix_nano=2, attributes=[_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", t)])
             for n, t in ((1, "ok1"), (2, "boom"), (3, "ok2"))]
    decoded = decode(_request(spans)).spans
    assert [d.call.tool if d.call else None for d in decoded] == ["ok1", None, "ok2"]
    assert decoded[1].run_id is None  # not judged, still forwarded (it is in the decoded list)


def test_error_type_alone_marks_a_failed_call() -> None:
    """GenAI puts failures in error.type; the span status may stay unset."""
    ok = _one({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    failed = _one({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "error.type": "TimeoutError"})
    assert ok.call.ok and not failed.call.ok


def _decision_event() -> Any:
    event = Span.Event(name="loopguard.decision", time_unix_nano=5)
    event.attributes.extend([_kv("loopguard.decision", "deny"), _kv("loopguard.dispatched", False),
                             _kv("loopguard.finding.kind", "repeat"), _kv("loopguard.tool.name", "t")])
    return event


@pytest.mark.parametrize("attrs, run_attr, expected", [
    ({"loopguard.run.id": "conv-1"}, None, "conv-1"),
    ({"gen_ai.conversation.id": "conv-2"}, "gen_ai.conversation.id", "conv-2"),
    ({}, None, (b"\x01" * 16).hex()),
])
def test_a_guard_decision_on_a_span_that_is_no_call_joins_the_audits_run(
        attrs: dict[str, Any], run_attr: Any, expected: str) -> None:
    """Receiver and audit put a decision recorded outside any tool span in the same run."""
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="agent step", start_time_unix_nano=1,
                end_time_unix_nano=2, attributes=[_kv(k, v) for k, v in attrs.items()], events=[_decision_event()])
    d = decode(_request([span]), run_attr).spans[0]
    assert d.guards and d.call is None and d.run_id == expected
    from otel_loopguard.otlp.spans import SpanCollector
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest as Req

    audit = SpanCollector(run_attr)
    audit.add(Req.FromString(_request([span])))
    assert audit.guard_events(expected)


# Every key some convention reads, and values of every type, markers included: whatever a
# span carries, the plan chosen from its markers must read what recognise() would pick.
_MARKER_VALUES = ["execute_tool", "chat", "text_completion", "generate_content", "TOOL", "tool", "LLM", "task",
                  "llm", "completion", "CHAIN", ""]
_ANY = st.one_of(st.sampled_from(_MARKER_VALUES), st.text(max_size=8), st.integers(-3, 5), st.booleans(),
                 st.floats(allow_nan=False), st.lists(st.sampled_from(["execute_tool", "x"]), max_size=2))


def _keys() -> list[str]:
    from otel_loopguard.conventions.spec import MODEL_CONVENTIONS, TASK_TOOL_CONVENTIONS, TOOL_CONVENTIONS
    from otel_loopguard.conventions import attributes as conv

    keys = {"error.type", "gen_ai.conversation.id"}
    for c in (*TOOL_CONVENTIONS, *TASK_TOOL_CONVENTIONS):
        keys.update((c.marker, c.tool, *c.call_id, *c.arguments, *c.result))
    for m in MODEL_CONVENTIONS:
        keys.update((m.marker, *m.model, *m.input_tokens, *m.output_tokens))
    keys.update(v for k, v in vars(conv).items() if k.isupper() and isinstance(v, str))
    return sorted(keys)


_MARKER_KEYS = ["gen_ai.operation.name", "openinference.span.kind", "llm.request.type", "traceloop.span.kind"]


@settings(max_examples=examples(1500), deadline=None)
@given(markers=st.dictionaries(st.sampled_from(_MARKER_KEYS), st.sampled_from(_MARKER_VALUES), max_size=4),
       others=st.dictionaries(st.sampled_from(_keys()), _ANY, max_size=10), error=st.booleans(),
       run_attr=st.sampled_from([None, "gen_ai.conversation.id"]))
def test_the_plan_read_matches_the_full_parse_whatever_the_span_carries(
        markers: dict[str, Any], others: dict[str, Any], error: bool, run_attr: Any) -> None:
    attrs = {**others, **markers}  # markers most of the time, competing ones too
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, start_time_unix_nano=1, end_time_unix_nano=2,
                attributes=[_kv(k, v) for k, v in attrs.items()],
                status=Status(code=Status.STATUS_CODE_ERROR if error else 0))
    d = decode(_request([span]), run_attr).spans[0]
    call, model, run_id = _full(span, run_attr)
    assert d.call == call
    assert (d.model is None) == (model is None)
    if model is not None:
        assert (d.model.model, d.model.input_tokens, d.model.output_tokens) == (
            model.model, model.input_tokens, model.output_tokens)
    if call is not None or model is not None:
        assert d.run_id == run_id


def test_the_content_id_tells_an_int_from_a_bool_or_a_float() -> None:
    """1, 1.0 and True hash alike in Python; a span re-sent with another type is not a re-delivery."""
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    contents = {_one({**base, "loopguard.turn": v}).content for v in (1, 1.0, True)}
    assert len(contents) == 3


@pytest.mark.parametrize("pieces", [[], [Status().SerializeToString()], [Status(code=1).SerializeToString()],
                                    [Status(code=2, message="boom").SerializeToString()],
                                    [b"\x12\x04boom\x18\x02"],  # another encoder's field order
                                    [Status(code=2).SerializeToString(), Status(message="later").SerializeToString()]])
def test_the_status_code_is_read_as_the_full_parse_reads_it(pieces: list[bytes]) -> None:
    """A status given in two pieces is merged, as protobuf merges a message field given twice."""
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, start_time_unix_nano=1, end_time_unix_nano=2,
                attributes=[_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", "t")])
    raw = span.SerializeToString() + b"".join(_field(0x7A, piece) for piece in pieces)
    full = Span.FromString(raw)
    d = decode(_framed(raw)).spans[0]
    assert d.call.ok is (full.status.code != Status.STATUS_CODE_ERROR)
    assert (full.status.code == 2) == any(b"\x18\x02" in piece for piece in pieces)  # the fixture says what it means


def test_an_error_status_with_a_message_marks_the_call_failed() -> None:
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, start_time_unix_nano=1, end_time_unix_nano=2,
                attributes=[_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", "t")],
                status=Status(code=Status.STATUS_CODE_ERROR, message="Timeout"))
    assert decode(_request([span])).spans[0].call.ok is False


@pytest.mark.parametrize("text, tokens", [("42", 42), ("²", 0), ("٣", 3), ("9" * 5000, 0), ("-5", 0), ("1e3", 0),
                                          ("0" * 22 + "42", 42), ("0", 0), ("", 0), (str(2**63), 0), (str(2**63 - 1), 2**63 - 1),
                                          ("\u0660" * 19 + "7", 7)])
def test_token_counts_written_as_text_never_break_recognition(text: str, tokens: int) -> None:
    """A count in a string attribute is read when int() reads it as a whole count; any other
    text counts as unknown ("²" is a digit int() refuses; 5000 digits are beyond int())."""
    found = recognise({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": text})
    assert isinstance(found, ModelSpan) and found.input_tokens == tokens
    d = _one({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": text})
    assert d.model is not None and d.model.input_tokens == tokens


def test_the_content_id_is_stable_for_nan_and_tells_apart_numbers_python_hashes_alike() -> None:
    """A re-delivered span with a NaN token count is a duplicate (NaN hashes by identity),
    and values with one hash (-1 and -2, 0.0 and -0.0, 1 and 2**61) are different spans."""
    chat = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": float("nan")}
    first = _one(chat)
    _ = [float(i) + 0.5 for i in range(1000)]  # other floats in between
    assert _one(chat).content == first.content
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    for a, b in ((-1, -2), (0.0, -0.0), (1, 2**61)):
        assert _one({**tool, "loopguard.turn": a}).content != _one({**tool, "loopguard.turn": b}).content, (a, b)


@pytest.mark.parametrize("count, tokens", [(10**30, 0), (-3, 0), (1e300, 0), (2**63 - 1, 2**63 - 1), (12.7, 12)])
def test_token_counts_beyond_what_otlp_carries_count_as_unknown(count: Any, tokens: int) -> None:
    """A count no OTLP int64 can hold (an SDK attribute can) would overflow the cost."""
    found = recognise({"gen_ai.operation.name": "chat", "gen_ai.usage.output_tokens": count})
    assert isinstance(found, ModelSpan) and found.output_tokens == tokens


def test_framework_wrapped_arguments_nested_past_the_stack_are_read_as_text() -> None:
    """A payload that looks wrapped ("input_str") but nests deeper than json can follow is
    kept as its text (and digested as such), not left to cost the span its judgement."""
    deep = '{"input_str": ' + "[" * 100_000
    d = _one({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.arguments": deep})
    assert d.call is not None and d.call.arguments == deep


def test_an_unreadable_span_re_sent_through_another_encoder_is_still_a_duplicate(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_loopguard.receiver.ingest import decode as module

    def broken(values: Any, error: bool) -> Any:
        raise ValueError("a bug")

    monkeypatch.setattr(module, "recognise", broken)
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="s", start_time_unix_nano=1, end_time_unix_nano=2,
                attributes=[_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", "t")])
    first = decode(_request([span])).spans[0]
    again = decode(_framed(span.SerializeToString() + b"\x30\x00")).spans[0]  # kind = 0 written out
    other = decode(_request([Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="s", start_time_unix_nano=1,
                                  end_time_unix_nano=3)])).spans[0]
    assert first.call is None and first.content == again.content != other.content


def test_the_dense_mark_and_the_exact_result_digest_are_read_as_the_full_parse_reads_them() -> None:
    tags = {"loopguard.tool.name": "t", "loopguard.seq": 3, "loopguard.seq.dense": True,
            "loopguard.result.digest": "m" * 32, "loopguard.result.exact_digest": "e" * 32}
    d = _one(tags)
    assert d.call is not None
    assert (d.call.seq, d.call.seq_dense, d.call.result_digest, d.call.result_exact_digest) == (3, True, "m" * 32, "e" * 32)
    bare = _one({"loopguard.tool.name": "t", "loopguard.seq": 3})
    assert bare.call is not None and bare.call.seq_dense is False  # a number alone promises no 1..N


@pytest.mark.parametrize("name, own", [
    ("loopguard.finding repeat/stop lookup_order", True),  # v1.1: with detail
    ("loopguard.finding", True),  # v1: bare, as older receivers named them
    ("loopguard.run scored/fail", True),
    ("loopguard.findings lookup_order", False),  # only the contract's names, not a prefix of them
    ("lookup_order", False),
])
def test_our_own_finding_spans_are_never_judged_again_whatever_their_detail(name: str, own: bool) -> None:
    """A pipeline that routes findings back through the receiver must not see loops made of
    findings; the negative controls are the same span under other names, read as a tagged call."""
    from otel_loopguard.findings import finding as make_finding
    from otel_loopguard.findings.otlp import finding_span, place_at

    f = make_finding("repeat", "stop", [], "lookup_order was called 5 times", tool="lookup_order", action="a" * 32)
    span = finding_span(f, [], place_at(b"\x01" * 16, b"\x02" * 8, 1, 2))
    span.name = name
    span.attributes.extend(to_key_values({"loopguard.seq": 1, "loopguard.key.id": "kid"}))
    d = decode(_request([span])).spans[0]
    assert (d.call is None) is own


def test_the_spans_read_for_the_tree_only_are_what_recognise_and_agent_of_find_nothing_in() -> None:
    """decode.judge() does not ask recognise() or agent_of() of values from the tree-only
    plans (OpenInference CHAIN, AGENT, ... spans): they must find nothing there, whatever else
    the plan read. Negative control: the OpenInference kinds other conventions read (LLM, TOOL)
    are not tree-only."""
    from otel_loopguard.conventions.recognise import agent_of
    from otel_loopguard.receiver.ingest import decode as reference

    assert {"CHAIN", "AGENT", "agent", "RETRIEVER"} <= reference._TREE_KINDS
    assert not {"LLM", "TOOL", "llm", "tool"} & reference._TREE_KINDS
    full = {key: "x" for key in reference._TREE_KEYS}
    full.update({"loopguard.terminal_response": True, "loopguard.run.calls": 3})
    for kind in reference._TREE_KINDS:
        values = {**full, "openinference.span.kind": kind}
        for error in (False, True):
            assert recognise(values, error) is None and recognise(values, error, "handoff to x") is None
        assert agent_of(values) is None
