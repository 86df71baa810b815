"""What a loop cost (findings/waste.py): calls, tool time, the model decisions in between with
their tokens and cost, and the share of the run, figure by figure, with mutation checks."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from otel_loopguard.calls import ModelCall, ToolCall
from otel_loopguard.findings import Finding
from otel_loopguard.findings.waste import ModelIndex, RunTotals, finding_waste, run_totals, run_waste
from otel_loopguard.policy import Price

S = 1_000_000_000
PRICES = {"gpt-x": Price(input=2.0, output=8.0)}


def price_for(model: Optional[str]) -> Optional[Price]:
    return PRICES.get(model or "")


def call(seq: int, start_s: float, seconds: float = 1.0, tool: str = "lookup_order") -> ToolCall:
    start = int(start_s * S)
    return ToolCall(seq=seq, tool=tool, action="a", result="r", ok=True, span_id=f"{seq:016x}",
                    start_ns=start, end_ns=start + int(seconds * S))


def model(end_s: float, tokens_in: int = 1000, tokens_out: int = 100, name: Optional[str] = "gpt-x") -> ModelCall:
    return ModelCall(turn=0, input_tokens=tokens_in, output_tokens=tokens_out, model=name, end_ns=int(end_s * S))


def loop(seqs: tuple[int, ...], kind: str = "repeat", **over: Any) -> Finding:
    fields: dict[str, Any] = dict(kind=kind, severity="stop", first_seq=seqs[0], last_seq=seqs[-1], count=len(seqs),
                                  seqs=seqs, span_ids=tuple(f"{s:016x}" for s in seqs), reason="r", tool="lookup_order")
    fields.update(over)
    return Finding(**fields)


# A run of 10 calls, 2 s apart from T0, each 1 s long; a model decision ends 0.5 s before each
# call after the first.
T0 = 1_700_000_000
CALLS = {s: call(s, start_s=T0 + 2 * (s - 1)) for s in range(1, 11)}
MODELS = [model(T0 + 2 * (s - 1) - 0.5) for s in range(2, 11)]
TOTALS = run_totals(CALLS.values(), len(CALLS))


def test_a_loop_over_calls_3_to_5_costs_three_calls_two_decisions_and_their_tokens() -> None:
    w = finding_waste(loop((3, 4, 5)), CALLS, ModelIndex(MODELS, price_for), TOTALS)
    assert w is not None
    assert (w.calls, w.seconds, w.model_calls) == (3, 3.0, 2)  # decisions before calls 4 and 5, not 3
    assert (w.input_tokens, w.output_tokens, w.tokens) == (2000, 200, 2200)
    assert w.cost_usd == pytest.approx(2 * (1000 * 2.0 + 100 * 8.0) / 1e6)
    assert TOTALS == RunTotals(calls=10, span_ns=19 * S)
    assert (w.share_calls, w.share_seconds) == (0.3, round(3 / 19, 4))


def test_attributes_are_named_under_the_prefix_and_unknowns_are_left_out() -> None:
    w = finding_waste(loop((3, 4, 5)), CALLS, ModelIndex(None, price_for), TOTALS)
    assert w is not None
    got = w.attributes("loopguard.finding.waste")
    assert got == {"loopguard.finding.waste.calls": 3, "loopguard.finding.waste.seconds": 3.0,
                   "loopguard.finding.waste.share_calls": 0.3,
                   "loopguard.finding.waste.share_seconds": round(3 / 19, 4)}


def test_an_unpriced_model_in_between_leaves_the_cost_unknown_but_counts_its_tokens() -> None:
    models = [*MODELS[:2], model(T0 + 4.9, name="other")]  # ends between calls 3 (4 s) and 4 (6 s)
    w = finding_waste(loop((3, 4, 5)), CALLS, ModelIndex(models, price_for), TOTALS)
    assert w is not None and w.cost_usd is None and w.model_calls == 1
    priced = finding_waste(loop((3, 4, 5)), CALLS, ModelIndex(models, lambda m: Price(input=1, output=1)), TOTALS)
    assert priced is not None and priced.cost_usd == pytest.approx(1100 / 1e6)


def test_mutation_a_shorter_loop_costs_less_and_one_call_costs_no_decision() -> None:
    index = ModelIndex(MODELS, price_for)
    five = finding_waste(loop((3, 4, 5, 6, 7)), CALLS, index, TOTALS)
    three = finding_waste(loop((3, 4, 5)), CALLS, index, TOTALS)
    one = finding_waste(loop((3,)), CALLS, index, TOTALS)
    assert five and three and one
    assert (five.calls, five.model_calls, five.input_tokens) == (5, 4, 4000)
    assert (three.calls, three.model_calls) == (3, 2)
    assert (one.calls, one.model_calls, one.cost_usd) == (1, 0, 0.0)


@pytest.mark.parametrize("kind", ["budget", "tool_cap", "incomplete_trace", "telemetry_duplicate", "duplicate_write"])
def test_kinds_that_name_a_limit_or_the_telemetry_carry_no_waste(kind: str) -> None:
    assert finding_waste(loop((3, 4, 5), kind=kind), CALLS, ModelIndex(MODELS, price_for), TOTALS) is None


def test_the_run_counts_overlapping_findings_once_and_separate_loops_both() -> None:
    index = ModelIndex(MODELS, price_for)
    overlapping = [loop((3, 4, 5)), loop((3, 4, 5, 6), kind="no_progress", severity="warn")]
    w = run_waste(overlapping, CALLS, index, TOTALS)
    assert (w.calls, w.seconds, w.model_calls) == (4, 4.0, 3)
    apart = run_waste([loop((1, 2, 3)), loop((7, 8, 9))], CALLS, index, TOTALS)
    assert (apart.calls, apart.model_calls) == (6, 4)  # 2 decisions inside each, none between the loops
    assert run_waste([], CALLS, index, TOTALS).calls == 0


def test_without_timed_model_decisions_no_tokens_are_claimed_and_no_run_span_gives_no_share() -> None:
    """A run recorded without its decisions (NDJSON tool calls, or untimed model spans) did not
    cost zero tokens: the figures are left out."""
    for models in ([], [ModelCall(turn=1, input_tokens=5)]):
        w = finding_waste(loop((3, 4, 5)), CALLS, ModelIndex(models, price_for), RunTotals(calls=0, span_ns=0))
        assert w is not None and (w.model_calls, w.tokens, w.cost_usd) == (None, None, None)
        assert (w.calls, w.share_calls, w.share_seconds) == (3, None, None)
    one = finding_waste(loop((3, 4, 5)), CALLS, ModelIndex([model(1.0)], price_for), TOTALS)
    assert one is not None and (one.model_calls, one.tokens, one.cost_usd) == (0, 0, 0.0)  # known: none in between
