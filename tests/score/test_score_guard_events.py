"""Guard decisions known only by their time (span events), and the order a run is fed in:
`judge` on RunInput directly, as the receiver and the audit's OTLP reader hand it over."""

from __future__ import annotations

from typing import Optional

from otel_loopguard.calls import GuardEvent, ModelCall
from otel_loopguard.policy import policy_from_mapping
from otel_loopguard.score import RunInput
from otel_loopguard.score.scoring import judge

from score_helpers import fingerprinter, raw

SEC = 1_000_000_000
T0 = 1_700_000_000 * SEC
NO_BUDGETS = {"max_turns": None, "max_tool_calls": None, "max_seconds": None}


def timed(seq: int) -> object:
    """Call `seq` starts at T0 + seq seconds, with arguments of its own (no finding)."""
    return raw(seq, "read", {"i": seq}, {"row": seq}, start_ns=T0 + seq * SEC, end_ns=T0 + seq * SEC + SEC // 2)


def scored(events: list[GuardEvent], n: int = 4) -> dict:
    fp = fingerprinter(policy_from_mapping({"budget": NO_BUDGETS}))
    report = judge(RunInput("r", [timed(s) for s in range(1, n + 1)], guard_events=events), fp)
    assert report.outcome == "scored"
    return report.score


def denied(after_seq: float, kind: Optional[str] = "repeat") -> GuardEvent:
    return GuardEvent(time_ns=T0 + int(after_seq * SEC), kind=kind, dispatched=False, tool="read")


def test_a_denial_sits_after_the_calls_that_started_before_it() -> None:
    """Denied between calls 2 and 3: in place of call 3, and calls 3 and 4 ran after it."""
    s = scored([denied(2.7)])
    assert (s["guard_fired"], s["guard_seq"], s["guard_before_dispatch"]) == (True, 3, True)
    assert s["executed_after_guard"] is True
    # Negative control: denied after the last call, nothing ran after it.
    s = scored([denied(4.7)])
    assert (s["guard_seq"], s["executed_after_guard"]) == (5, False)


def test_a_denial_before_any_call_is_in_place_of_the_first() -> None:
    s = scored([denied(0.5)])
    assert (s["guard_seq"], s["executed_after_guard"]) == (1, True)


def test_the_earliest_of_several_guard_events_is_reported() -> None:
    s = scored([denied(3.5, "cycle"), denied(1.5, "budget")])
    assert s["guard_seq"] == 2 and s["repeat_threshold_crossed"] is False  # the budget's, not the cycle's


def test_a_guard_event_without_a_kind_is_a_loop_stop() -> None:
    """An event that does not say why came from the repeat guard (docs/scoring.md)."""
    assert scored([denied(2.5, None)])["repeat_threshold_crossed"] is True
    assert scored([denied(2.5, "cycle")])["repeat_threshold_crossed"] is True
    # Negative control: a budget denial is not a loop.
    assert scored([denied(2.5, "budget")])["repeat_threshold_crossed"] is False


def test_a_turns_model_call_is_fed_before_its_tool_calls() -> None:
    """The decision comes before the calls it requested: reaching the turn limit with turn
    2's model call has the last call of turn 1 as its evidence, and turn 2 still runs."""
    fp = fingerprinter(policy_from_mapping({"budget": {**NO_BUDGETS, "max_turns": 2}}))
    calls = [raw(s, "read", {"i": s}, {"row": s}, turn=s) for s in (1, 2)]
    models = [ModelCall(turn=t, input_tokens=10, output_tokens=10) for t in (2, 1)]  # any order: fed by turn
    report = judge(RunInput("r", calls, models=models), fp)
    (stop,) = [f for f in report.findings if f.kind == "budget"]
    assert (stop.severity, stop.seqs) == ("stop", (1,))
    assert report.score["first_stop_seq"] == 1
