"""What the decode fuzzer found, pinned: calls of one conversation in different traces may
share a span id (span ids are unique only within their trace)."""

from __future__ import annotations

from otel_loopguard.calls import RawCall
from otel_loopguard.otlp.order import order_calls


def _call(trace: str, span: str, start: int) -> RawCall:
    return RawCall(seq=0, tool="lookup_order", arguments={"q": start}, span_id=span, trace_id=trace,
                   start_ns=start, end_ns=start + 1)


def test_two_traces_sharing_a_span_id_get_two_numbers() -> None:
    calls = [_call("a" * 32, "1" * 16, 10), _call("b" * 32, "1" * 16, 20), _call("a" * 32, "2" * 16, 30)]
    assert [c.seq for c in order_calls(calls, [])] == [1, 2, 3]


def test_a_redelivered_span_still_gets_one_number() -> None:
    """Negative control: the same span twice (same trace and span id) is one call's number."""
    calls = [_call("a" * 32, "1" * 16, 10), _call("a" * 32, "1" * 16, 10), _call("a" * 32, "2" * 16, 30)]
    assert [c.seq for c in order_calls(calls, [])] == [1, 1, 2]
