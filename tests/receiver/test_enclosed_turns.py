"""A model span that is the parent of its calls, in the receiver (issue 30): Google ADK +
OpenInference writes one LLM span per agent run, ending after every call of it. The receiver
reads its record of the conversation (receiver/ingest/scans.py, both decoders) and numbers the
calls' turns from it (otlp/order.enclosed_turns, in runs/buffer.py), as the audit does.

On the real captures through decode and the run assembly (no server): the repeat and the error
streak are found; without the third call the stop finding is gone; a model span that is not
their parent, or whose record is past the cap, leaves the turns the times give (siblings: no
loop); a record survives a snapshot and a late judging.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_loopguard.calls import ModelCall
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.otlp.values import to_key_values
from otel_loopguard.policy import policy_from_mapping
from otel_loopguard.receiver.ingest import scans
from otel_loopguard.receiver.ingest.decoder import decode
from otel_loopguard.receiver.runs.buffer import RunBuffer
from otel_loopguard.receiver.runs.late import packed_op, unpacked_op
from otel_loopguard.receiver.state.snapshot import SnapshotError, _op_in, _op_out

from tests.frameworks.fw_labels import CAPTURES, request_of
from .harness import judged_alone

KEY = "receiver-enclosed-key-0123456789"


def _spans(capture: str) -> list[Span]:
    return list(request_of(CAPTURES / f"{capture}.json").resource_spans[0].scope_spans[0].spans)


def _tools(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s.name.startswith("execute_tool")]


def _llm(spans: list[Span]) -> Span:
    (llm,) = [s for s in spans if any(kv.key == "openinference.span.kind" and kv.value.string_value == "LLM"
                                      for kv in s.attributes)]
    return llm


def _judged(spans: list[Span]) -> tuple[list[int], list[str]]:
    """(the calls' turns in sequence order, the findings' names) as the receiver judges the run."""
    calls, names = judged_alone(spans, KEY)
    return [c.turn for c in calls], names


@pytest.mark.parametrize("capture, stop", [("adk_openinference__repeat", "repeat/stop lookup_order"),
                                           ("adk_openinference__repeat__content-off", "repeat/stop lookup_order"),
                                           ("adk_openinference__errors", "error_streak/stop flaky_tool")])
def test_calls_under_the_model_span_take_their_turns_from_its_record(capture: str, stop: str) -> None:
    turns, names = _judged(_spans(capture))
    assert len(set(turns)) == len(turns), turns  # one decision each, as the conversation says
    assert stop in names
    # Mutation: without the third call the run stops short of the stop finding
    spans = _spans(capture)
    third = _tools(spans)[2]
    turns, names = _judged([s for s in spans if s is not third])
    assert len(turns) == len(_tools(spans)) - 1 and stop not in names


def test_a_model_span_that_is_not_the_calls_parent_keeps_the_turns_of_its_end() -> None:
    """Negative control: the same spans, the calls under the agent span instead. The model span
    ends after them all, so by the times they are one decision's batch: no loop (as before)."""
    spans = _spans("adk_openinference__repeat")
    llm = _llm(spans)
    for tool in _tools(spans):
        tool.parent_span_id = llm.parent_span_id
    turns, names = _judged(spans)
    assert turns == [0] * 5
    assert not [n for n in names if n.startswith("repeat/")]


def test_a_model_span_ending_before_its_calls_is_a_turn_boundary_record_or_not() -> None:
    """Negative control: OpenInference LLM spans that end before the call they asked for (most
    frameworks) keep their turns from their ends, though each records the conversation."""
    spans = _spans("adk_openinference__repeat")
    llm, tools = _llm(spans), _tools(spans)
    out = [s for s in spans if s is not llm]
    for i, tool in enumerate(tools):
        model = Span()
        model.CopyFrom(llm)
        model.span_id = bytes([0xA0 + i]) * 8
        model.start_time_unix_nano, model.end_time_unix_nano = tool.start_time_unix_nano - 2, tool.start_time_unix_nano - 1
        tool.parent_span_id = llm.parent_span_id
        out.append(model)
    turns, names = _judged(out)
    assert turns == [1, 2, 3, 4, 5]
    assert "repeat/stop lookup_order" in names  # one call a decision, by the times


def test_a_record_past_the_cap_leaves_the_turns_of_the_times() -> None:
    """Past scans.MAX_SCANNED entries the record is dropped whole: siblings, no loop, never a
    finding made of a cut record."""
    spans = _spans("adk_openinference__repeat")
    llm = _llm(spans)
    llm.attributes.extend(to_key_values({f"llm.input_messages.{100 + i}.message.tool_calls.0.tool_call.id": f"x{i}"
                                         for i in range(scans.MAX_SCANNED)}))
    turns, names = _judged(spans)
    assert turns == [0] * 5 and "repeat/stop lookup_order" not in names


def _model(**over: Any) -> ModelCall:
    return ModelCall(**{"turn": 1, "input_tokens": 3, "output_tokens": 4, "model": "m", "end_ns": 9, **over})


def test_a_record_survives_a_snapshot_and_a_late_judging() -> None:
    model = _model(span_id="ab" * 8, requested={"c1": 2, "c2": 4})
    assert _op_in(_op_out(("model", model))) == ("model", model)
    assert unpacked_op(packed_op(("model", model))) == ("model", model)
    # a snapshot saved before records were read still loads: no record
    old = ["model", {"turn": 1, "input_tokens": 3, "output_tokens": 4, "model": "m", "end_ns": 9}]
    assert _op_in(old) == ("model", _model())
    with pytest.raises(SnapshotError, match="model.requested"):
        _op_in(["model", {**old[1], "span_id": "ab", "requested": {"c1": True}}])
    with pytest.raises(SnapshotError, match="model.span_id"):
        _op_in(["model", {**old[1], "span_id": 7, "requested": None}])


def test_a_run_rebuilt_from_its_journal_numbers_its_turns_alike() -> None:
    """The journal (snapshots, late calls) replays the model span with its record."""
    fp = Fingerprinter(load_key(key=KEY), policy_from_mapping({}))
    spans = _spans("adk_openinference__repeat")
    data = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    decoded = decode(data.SerializeToString()).spans
    first = RunBuffer("r", fp, 0.0, journal=True)
    for d in decoded:
        if d.call is not None:
            first.add_call(d.call, 0.0)
        elif d.model is not None:
            first.add_model(d.model, 0.0)
    again = RunBuffer("r", fp, 0.0, journal=True)
    for op in first.journal or []:
        again.replay(_op_in(_op_out(op)), 0.0)
    for buffer in (first, again):
        buffer.complete()
    assert [again.recent.get(s).turn for s in range(1, 6)] == [first.recent.get(s).turn for s in range(1, 6)]
    assert len({first.recent.get(s).turn for s in range(1, 6)}) == 5
