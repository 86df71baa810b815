"""ToolCall and RawCall keep every property of a frozen dataclass with their quick __init__."""

from __future__ import annotations

import dataclasses

import pytest

from otel_loopguard.calls import Evidence, RawCall, ToolCall, quick_init


def test_still_frozen_after_construction() -> None:
    call = ToolCall(1, "t", "a", "r", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.seq = 2  # type: ignore[misc]


def test_defaults_keywords_positions_and_replace_behave_as_generated() -> None:
    call = ToolCall(seq=1, tool="t", action="a", result=None, ok=None, span_id="s")
    assert (call.turn, call.evidence, call.flags, call.span_id) == (None, Evidence(), frozenset(), "s")
    assert ToolCall(1, "t", "a", None, None, None, None, "s") == call
    moved = dataclasses.replace(call, seq=7)
    assert moved.seq == 7 and moved.span_id == "s" and call.seq == 1
    assert hash(call) == hash(ToolCall(1, "t", "a", None, None, span_id="s"))
    assert repr(call).startswith("ToolCall(seq=1, tool='t'")


def test_a_default_factory_gives_each_instance_its_own_value() -> None:
    a, b = RawCall(1, "t"), RawCall(2, "t")
    assert a.identity == {} and a.identity is not b.identity
    given = {"k": 1}
    assert RawCall(1, "t", identity=given).identity is given


def test_missing_or_unknown_arguments_raise_like_any_init() -> None:
    with pytest.raises(TypeError, match="missing"):
        RawCall()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword"):
        RawCall(1, "t", nonsense=1)  # type: ignore[call-arg]


def test_matches_a_plain_frozen_dataclass_field_for_field() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Plain:
        a: int
        b: str = "x"
        c: list[int] = dataclasses.field(default_factory=list)

    Quick = quick_init(dataclasses.make_dataclass("Quick", [("a", int), ("b", str, dataclasses.field(default="x")),
                                                            ("c", list, dataclasses.field(default_factory=list))],
                                                  frozen=True, slots=True))
    for args, kwargs in (((1,), {}), ((1, "y"), {}), ((1,), {"c": [2]})):
        assert dataclasses.astuple(Quick(*args, **kwargs)) == dataclasses.astuple(Plain(*args, **kwargs))


def test_the_field_order_the_hot_paths_build_records_in() -> None:
    """fingerprint/call.py builds ToolCall, otlp/spans.py builds RawCall, and the processor
    calls fingerprint_finished, all by position (keywords cost more than the record): a
    reordered field would silently swap values, so the order is pinned here."""
    import inspect

    from otel_loopguard.fingerprint import fingerprint_finished

    assert [f.name for f in dataclasses.fields(ToolCall)] == [
        "seq", "tool", "action", "result", "ok", "turn", "call_id", "span_id", "start_ns", "end_ns",
        "evidence", "trace_id", "parent_id", "write", "write_key", "flags", "exact",
    ]
    assert [f.name for f in dataclasses.fields(RawCall)] == [
        "seq", "tool", "arguments", "result", "ok", "finished", "turn", "call_id", "span_id", "start_ns",
        "end_ns", "identity", "args_digest", "result_digest", "dispatched", "guard", "key_id", "trace_id", "parent_id",
        "seq_dense", "result_exact_digest",
    ]
    assert list(inspect.signature(fingerprint_finished).parameters) == [
        "fp", "seq", "tool", "arguments", "result", "ok", "turn", "call_id", "span_id", "start_ns", "end_ns",
        "trace_id", "parent_id", "finished", "identity", "args_digest", "result_digest", "result_exact",
    ]


@pytest.mark.parametrize("call", [
    RawCall(0, "t", '{"a": 1}', "r", False, False, 3, "c", "s", 1, 2, {"k": 1}, "ad", "rd", False, "g", "kid", "tr", "p",
            True, "xd"),
    ToolCall(0, "t", "a", "r", False, 3, "c", "s", 1, 2, Evidence(version=1.0), "tr", "p", "w", "wk", frozenset({"f"}), "x"),
])
def test_renumbered_changes_seq_and_turn_and_keeps_every_other_field(call: object) -> None:
    """The positional copy must list every field: compared with dataclasses.replace field by field."""
    moved = call.renumbered(9, 4)  # type: ignore[attr-defined]
    assert moved == dataclasses.replace(call, seq=9, turn=4)  # type: ignore[type-var]
    assert [f.name for f in dataclasses.fields(call) if getattr(moved, f.name) != getattr(call, f.name)] == ["seq", "turn"]  # type: ignore[arg-type]
