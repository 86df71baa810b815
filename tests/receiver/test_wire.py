"""Hand-encoded finding-span fragments parse to exactly what protobuf objects would hold."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_loopguard.otlp import wire
from otel_loopguard.otlp.values import to_key_values


scalars = st.one_of(
    st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False), st.text(max_size=300),
)
values = st.one_of(scalars, st.lists(scalars, max_size=5))


@given(st.dictionaries(st.text(max_size=40), values, max_size=12))
def test_attributes_match_protobuf_objects(attrs: dict[str, Any]) -> None:
    ours = Span()
    ours.MergeFromString(wire.attributes(attrs, wire.SPAN_ATTRIBUTE))
    theirs = Span(attributes=to_key_values(attrs))
    assert ours == theirs


@given(st.text(max_size=30), st.integers(min_value=0, max_value=2**64 - 1),
       st.dictionaries(st.text(max_size=20), scalars, max_size=4), st.binary(min_size=16, max_size=16),
       st.binary(min_size=8, max_size=8))
def test_events_and_links_match_protobuf_objects(name: str, t: int, attrs: dict[str, Any], trace: bytes, sid: bytes) -> None:
    ours = Span()
    ours.MergeFromString(wire.event(name, t, attrs) + wire.link(trace, sid))
    theirs = Span()
    theirs.events.add(name=name, time_unix_nano=t, attributes=to_key_values(attrs))
    theirs.links.add(trace_id=trace, span_id=sid)
    assert ours == theirs


def test_a_string_that_is_not_valid_unicode_is_replaced_not_raised() -> None:
    span = Span()
    span.MergeFromString(wire.attributes({"k": "bad \ud800 surrogate"}, wire.SPAN_ATTRIBUTE))
    assert span.attributes[0].value.string_value == "bad ? surrogate"


def test_an_int_beyond_int64_is_written_as_text_not_wrapped() -> None:
    span = Span()
    span.MergeFromString(wire.attributes({"big": 2**63, "small": -(2**63) - 1, "edge": 2**63 - 1}, wire.SPAN_ATTRIBUTE))
    values = {kv.key: kv.value for kv in span.attributes}
    assert values["big"].string_value == str(2**63) and values["small"].string_value == str(-(2**63) - 1)
    assert values["edge"].int_value == 2**63 - 1


def test_cached_encodings_keep_signed_zero_and_bool_apart_from_equal_values() -> None:
    """0.0 == -0.0 and 1 == True in Python: each must still be written as itself."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as _Span

    from otel_loopguard.otlp import wire as _wire

    for values in ({"x": 0.0}, {"x": -0.0}, {"x": 1}, {"x": True}, {"x": 0.0}, {"x": -0.0}):
        span = _Span()
        span.MergeFromString(_wire.attributes(values, _wire.SPAN_ATTRIBUTE))
        value = span.attributes[0].value
        got = getattr(value, value.WhichOneof("value"))
        assert type(got) is type(values["x"]) and repr(got) == repr(values["x"])


def test_long_strings_from_telemetry_are_never_kept_by_the_encoding_cache() -> None:
    from otel_loopguard.otlp import wire as _wire

    _wire._pair.cache_clear()
    _wire.attributes({"loopguard.run.id": "r" * (_wire.MAX_CACHED_CHARS + 1), "loopguard.seq": 3}, _wire.SPAN_ATTRIBUTE)
    assert _wire._pair.cache_info().currsize == 1  # the int only
