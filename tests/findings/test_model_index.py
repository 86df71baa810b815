"""The waste's index of model decisions (findings/waste.py ModelIndex) built as decisions come
gives what the index built at once from all of them gave: the same windows, the same sums, to
the last bit of the cost. The plain reference below is the index as it was built before: one
stable sort by end time, then running sums."""

from __future__ import annotations

import bisect
import random
from typing import Optional

import pytest

from otel_loopguard.calls import ModelCall
from otel_loopguard.findings.waste import ModelIndex
from otel_loopguard.policy import Price

PRICES = {"a": Price(input=2.5, output=10.0), "b": Price(input=0.15, output=0.6), "*": Price(input=1.1, output=3.3)}


def price_for(model: Optional[str]) -> Optional[Price]:
    return PRICES.get(model or "")


def wildcard_price(model: Optional[str]) -> Optional[Price]:
    return PRICES.get(model or "") or PRICES["*"]


def plain_between(models: list[ModelCall], prices, after: int, until: int) -> tuple[int, int, int, float, int]:
    """All at once: sort (stable), running sums, two bisections."""
    timed = sorted((m for m in models if m.end_ns), key=lambda m: m.end_ns or 0)
    ends = [m.end_ns or 0 for m in timed]
    sums = [(0, 0, 0.0, 0)]
    for m in timed:
        i, o, c, u = sums[-1]
        p = prices(m.model)
        cost = 0.0 if p is None else (m.input_tokens * p.input + m.output_tokens * p.output) / 1e6
        sums.append((i + m.input_tokens, o + m.output_tokens, c + cost, u + (p is None)))
    lo = bisect.bisect_right(ends, after)
    hi = max(lo, bisect.bisect_right(ends, until))
    a, b = sums[lo], sums[hi]
    return hi - lo, b[0] - a[0], b[1] - a[1], b[2] - a[2], b[3] - a[3]


def decisions(rng: random.Random, n: int, order: str) -> list[ModelCall]:
    ends = [rng.randrange(0, 40) * 1000 for _ in range(n)]  # few distinct ends: many ties
    if order == "ascending":
        ends.sort()
    elif order == "mostly":  # in end order but for a few swapped neighbours (a request's spans)
        ends.sort()
        for _ in range(n // 5):
            i = rng.randrange(max(1, n - 1))
            ends[i], ends[min(i + 1, n - 1)] = ends[min(i + 1, n - 1)], ends[i]
    return [ModelCall(turn=0, input_tokens=rng.randrange(0, 5000), output_tokens=rng.randrange(0, 900),
                      model=rng.choice(["a", "b", "c", None]), end_ns=e or rng.choice([None, 0, e]))
            for e in ends]


@pytest.mark.parametrize("order", ["ascending", "mostly", "random"])
@pytest.mark.parametrize("prices", [price_for, wildcard_price])
def test_built_as_decisions_come_equals_built_at_once_at_every_step(order: str, prices) -> None:
    rng = random.Random(f"{order}-{prices.__name__}")
    for _ in range(30):
        models = decisions(rng, rng.randrange(0, 60), order)
        index = ModelIndex((), prices)
        for k, m in enumerate(models):
            index.add(m)
            seen = models[: k + 1]
            assert index.known == any(x.end_ns for x in seen)
            for _ in range(4):
                after, until = sorted(rng.randrange(-1000, 42_000) for _ in range(2))
                assert index.between(after, until) == plain_between(seen, prices, after, until)
        at_once = ModelIndex(models, prices)
        assert at_once.between(-1, 10**9) == index.between(-1, 10**9) == plain_between(models, prices, -1, 10**9)


def test_the_cost_sums_in_end_order_whatever_the_arrival_to_the_last_bit() -> None:
    """Float sums depend on their order: a late decision placed among the others must give the
    bits of the sorted sum (a mutation adding it at the end would round differently)."""
    ms = [ModelCall(turn=0, input_tokens=t, output_tokens=0, model="a", end_ns=e)
          for t, e in ((1, 30), (3, 10), (7, 20), (11, 5))]
    index = ModelIndex((), price_for)
    for m in ms:
        index.add(m)
    assert index.between(0, 100) == plain_between(ms, price_for, 0, 100)
    assert index.between(6, 20) == plain_between(ms, price_for, 6, 20) == (2, 10, 0, pytest.approx(25e-6), 0)


def test_none_or_no_timed_decision_is_unknown() -> None:
    assert not ModelIndex(None, price_for).known
    index = ModelIndex((), price_for)
    index.add(ModelCall(turn=0, input_tokens=5, end_ns=None))
    assert not index.known and index.between(0, 10) == (0, 0, 0, 0.0, 0)
    index.add(ModelCall(turn=0, input_tokens=5, end_ns=3))
    assert index.known and index.between(0, 10) == (1, 5, 0, 0.0, 1)
