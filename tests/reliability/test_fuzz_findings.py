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


def test_a_span_redelivered_after_the_dedupe_window_is_judged_once() -> None:
    """The fuzzer's second finding: the dedupe table is bounded (and shrinks under memory
    pressure), so a retried span can reach a run that still holds it; it must not make the
    run's judging fail at completion. Negative control: two different spans are two calls."""
    from otel_loopguard.canon import load_key
    from otel_loopguard.fingerprint import Fingerprinter
    from otel_loopguard.policy import Policy
    from otel_loopguard.receiver.runs.buffer import RunBuffer

    fp = Fingerprinter(load_key(key=b"fuzz-findings-key-0123456789"), Policy())
    for spans in (["1", "1", "2"], ["1", "3", "2"]):
        buffer = RunBuffer("conv-1", fp, now=0.0)
        for n, span in enumerate(spans):
            buffer.add_call(_call("a" * 32, span * 16, 10 * int(span)), now=float(n))
        found = buffer.complete()
        assert not buffer.integrity_error and not [f for f in found if f.kind == "integrity_conflict"]
        assert buffer.tool_calls_seen == len(spans)  # both deliveries arrived; judging took one


def test_a_denied_call_and_a_ran_call_sharing_a_span_id_across_traces_keep_their_own_facts() -> None:
    """Held calls are told apart by trace and span id: the guard's denial of one call must not
    be read as the fate of another trace's call that happens to share its span id. Negative
    control: with different span ids the counts are the same."""
    import dataclasses

    from otel_loopguard.canon import load_key
    from otel_loopguard.fingerprint import Fingerprinter
    from otel_loopguard.policy import Policy
    from otel_loopguard.receiver.runs.buffer import RunBuffer

    fp = Fingerprinter(load_key(key=b"fuzz-findings-key-0123456789"), Policy())
    for second_span in ("1", "2"):
        buffer = RunBuffer("conv-1", fp, now=0.0)
        ran = _call("a" * 32, "1" * 16, 10)
        denied = dataclasses.replace(_call("b" * 32, second_span * 16, 20), dispatched=False, guard="repeat")
        buffer.add_call(ran, now=0.0)
        buffer.add_call(denied, now=1.0)
        buffer.complete()
        assert buffer.run.summary.tool_calls == 1, second_span  # the denied call never ran
