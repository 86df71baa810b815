"""The decode, fuzzed: tens of thousands of generated and mutated requests, no crash, no
traceback, clear refusals, and nothing of an accepted request lost (fuzzing.py says what one
case checks). bench/fuzz_decode.py runs the same checks by the million."""

from __future__ import annotations

import random
from typing import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .fuzzing import Pipeline, corpus, mutate, random_request, requests

MUTATED_CASES = 30_000
SEEDED_CASES = 5_000  # hypothesis draws the seeds: a structured request each, then mutated


@pytest.fixture(scope="module")
def pipeline() -> Iterator[Pipeline]:
    p = Pipeline()
    yield p
    p.finish()
    p.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                  HealthCheck.function_scoped_fixture])
@given(requests)
def test_generated_requests_with_odd_attribute_types(pipeline: Pipeline, data: bytes) -> None:
    assert pipeline.check(data) in ("accepted", "too_many_spans")  # generated ones are valid protobuf


@settings(max_examples=SEEDED_CASES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**64))
def test_seeded_requests_whole_and_mutated(pipeline: Pipeline, seed: int) -> None:
    rnd = random.Random(seed)
    data = random_request(rnd)
    assert pipeline.check(data) in ("accepted", "too_many_spans")
    pipeline.check(mutate(data, rnd))


def test_mutated_agent_requests_by_the_ten_thousand(pipeline: Pipeline) -> None:
    rnd = random.Random(13)
    seeds = corpus()
    for _ in range(MUTATED_CASES):
        pipeline.check(mutate(rnd.choice(seeds), rnd))
    # the cases reached every outcome: refused and accepted (with spans to judge)
    assert pipeline.outcomes.get("refused", 0) > MUTATED_CASES // 20, pipeline.outcomes
    assert pipeline.outcomes.get("accepted", 0) > MUTATED_CASES // 20, pipeline.outcomes


def test_the_checks_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a decode that loses a span is caught by the same check."""
    from . import fuzzing

    p = Pipeline()
    real = fuzzing.parse_request

    def losing(*args: object, **kwargs: object) -> object:
        decoded = real(*args, **kwargs)  # type: ignore[arg-type]
        if decoded.spans:
            decoded.spans.pop()
        return decoded

    monkeypatch.setattr(fuzzing, "parse_request", losing)
    try:
        with pytest.raises(AssertionError, match="lost or counted twice"):
            p.check(corpus()[0])
    finally:
        p.close()
