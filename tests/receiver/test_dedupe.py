"""Re-delivery and reordering of a looping agent's spans never change its findings.

The agent's spans are recorded once with the real SDK and encoded exactly as the
real OTLP exporter encodes them; each scenario sends those same spans to a fresh
receiver, so the offending span ids can be compared with a baseline.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from otel_loopguard.receiver.ingest.dedupe import SpanDeduper

from .agent import LOOP, encode, record_spans
from .harness import (
    RUN,
    ReceiverThread,
    Sink,
    app_spans,
    attr,
    export_stub,
    read_findings,
    findings_of,
    make_config,
    wait_for,
)

SEED = 20240611
TOOL_SPANS = 6
ALL_SPANS = 1 + 6 + 6  # root, chats, tools


@pytest.fixture(scope="module")
def recorded() -> tuple[str, list[Any]]:
    return record_spans(LOOP)


def _deliver(spans_per_request: list[list[Any]]) -> tuple[Sink, dict[str, Any]]:
    """Send the requests to a fresh receiver, wait (bounded) for the run summary, return what the sink saw."""
    sink = Sink()
    receiver = ReceiverThread(make_config(sink.port, root_grace_seconds=0.5))
    channel, stub = export_stub(receiver.port)
    try:
        for spans in spans_per_request:
            response = stub.Export(encode(spans), timeout=10)
            assert not response.HasField("partial_success")
        # the run completes 0.5 s after its root arrived; then its findings and summary follow
        assembler = receiver.running.assembler
        wait_for(lambda: sink.runs() or not receiver.sync(lambda: bool(assembler.runs)), what="run completion")
        try:
            wait_for(lambda: sink.runs(), timeout=1.0, what="run summary")
        except AssertionError:
            pass  # the tests below say what is missing
        metrics = {name: receiver.running.metrics.get(name) for name in ("duplicates_total", "conflicts_total", "late_spans_total")}
    finally:
        channel.close()
        receiver.stop()
        sink.stop()
    return sink, metrics


def _loop_findings(sink: Sink) -> list[tuple[Any, ...]]:
    """As a reader gets them, however the deliveries batched them (a warn folded into its stop
    or named by it: issue 29)."""
    return [k for k in read_findings(sink) if k[0] != "telemetry_duplicate"]


@pytest.fixture(scope="module")
def baseline(recorded: tuple[str, list[Any]]) -> dict[str, Any]:
    _, spans = recorded
    sink, metrics = _deliver([spans])
    summary = sink.runs()[0]
    return {
        "findings": _loop_findings(sink),
        "tool_calls": attr(summary, "loopguard.score.tool_calls"),
        "passed": attr(summary, "loopguard.score.release.passed"),
        "metrics": metrics,
        "app_ids": sorted(s.span_id for s in app_spans(sink)),
    }


def test_baseline_is_a_loop(baseline: dict[str, Any], recorded: tuple[str, list[Any]]) -> None:
    kinds = Counter((k[0], k[1]) for k in baseline["findings"])
    assert kinds[("repeat", "stop")] == 1 and kinds[("repeat", "warn")] == 0  # the warn: folded or named
    (stop,) = [k for k in baseline["findings"] if k[:2] == ("repeat", "stop")]
    assert stop[-1] == 3  # warned at call 3
    assert baseline["tool_calls"] == TOOL_SPANS
    assert baseline["passed"] is False
    assert baseline["metrics"]["duplicates_total"] == 0
    assert len(baseline["app_ids"]) == ALL_SPANS == len(recorded[1])


def _shuffled(items: list[Any], salt: int) -> list[Any]:
    out = list(items)
    random.Random(SEED + salt).shuffle(out)
    return out


def _scenarios(spans: list[Any]) -> dict[str, tuple[list[list[Any]], int]]:
    """name -> (requests, expected duplicate spans)."""
    singles = [[s] for s in spans]
    return {
        "whole_request_twice": ([spans, spans], ALL_SPANS),
        "one_span_requests_shuffled": (_shuffled(singles, 1), 0),
        "one_span_requests_shuffled_and_duplicated": (_shuffled(singles + singles, 2), ALL_SPANS),
        # a batch that itself holds every span twice, reversed
        "duplicates_inside_one_request": ([list(reversed(spans)) + spans], ALL_SPANS),
    }


SCENARIOS = ["whole_request_twice", "one_span_requests_shuffled", "one_span_requests_shuffled_and_duplicated",
             "duplicates_inside_one_request"]
ALL = [pytest.param(name, id=name) for name in SCENARIOS]
_cache: dict[str, tuple[Sink, dict[str, Any], int]] = {}


@pytest.fixture
def delivered(scenario: str, recorded: tuple[str, list[Any]]) -> tuple[str, Sink, dict[str, Any], int]:
    if scenario not in _cache:  # each scenario is delivered once, its outcome shared by the tests below
        _, spans = recorded
        requests, expected_dups = _scenarios(spans)[scenario]
        sink, metrics = _deliver(requests)
        _cache[scenario] = (sink, metrics, expected_dups)
    return (scenario, *_cache[scenario])


@pytest.mark.parametrize("scenario", ALL)
def test_every_app_span_reaches_the_sink_exactly_once(delivered: Any, baseline: dict[str, Any]) -> None:
    _, sink, _, _ = delivered
    ids = [s.span_id for s in app_spans(sink)]
    assert len(ids) == ALL_SPANS, Counter(ids).most_common(3)
    assert sorted(ids) == baseline["app_ids"]


@pytest.mark.parametrize("scenario", ALL)
def test_findings_equal_the_baseline(delivered: Any, baseline: dict[str, Any]) -> None:
    _, sink, metrics, _ = delivered
    assert _loop_findings(sink) == baseline["findings"]
    summary = sink.runs()[0]
    assert attr(summary, "loopguard.score.tool_calls") == baseline["tool_calls"]  # a re-delivery is not a call
    assert attr(summary, "loopguard.score.release.passed") == baseline["passed"]
    assert attr(summary, "loopguard.run.outcome") == "scored"
    assert metrics["late_spans_total"] == 0


@pytest.mark.parametrize("scenario", ALL)
def test_duplicates_are_counted_and_reported_but_never_as_repeats(delivered: Any, baseline: dict[str, Any],
                                                                   recorded: tuple[str, list[Any]]) -> None:
    _, sink, metrics, expected_dups = delivered
    assert metrics["duplicates_total"] == expected_dups
    assert metrics["conflicts_total"] == 0
    dup_findings = findings_of(sink, kind="telemetry_duplicate")
    assert len(dup_findings) == (TOOL_SPANS if expected_dups else 0)  # only tool spans are calls
    for f in dup_findings:
        assert attr(f, "loopguard.finding.severity") == "info"
        assert f.trace_id.hex() == recorded[0]
    repeats = [k for k in _loop_findings(sink) if k[0] == "repeat"]
    assert repeats == [k for k in baseline["findings"] if k[0] == "repeat"]


def test_telemetry_duplicate_names_the_redelivered_span(recorded: tuple[str, list[Any]]) -> None:
    _, spans = recorded
    sink, _ = _deliver([spans, spans])
    tool_ids = sorted(s.context.span_id.to_bytes(8, "big").hex() for s in spans if s.name.startswith("execute_tool"))
    named = sorted(tuple(attr(f, "loopguard.finding.span_ids") or ()) for f in findings_of(sink, kind="telemetry_duplicate"))
    assert named == [(sid,) for sid in tool_ids]
    root = next(s for s in spans if s.parent is None).context.span_id.to_bytes(8, "big")
    tools = {s.context.span_id.to_bytes(8, "big").hex(): s.attributes["gen_ai.tool.name"] for s in spans
             if s.name.startswith("execute_tool")}
    for f in findings_of(sink, kind="telemetry_duplicate"):
        assert [link.span_id.hex() for link in f.links] == attr(f, "loopguard.finding.span_ids")
        assert f.parent_span_id == root  # under the run's root (CONTRACT 2), not the call's own parent
        assert attr(f, "loopguard.tool.name") == tools[attr(f, "loopguard.finding.span_ids")[0]]


@pytest.mark.parametrize("size, ttl", [(0, 600.0), (10, 0.0), (1, 600.0)])
def test_a_request_remembered_at_once_is_bounded_as_one_span_at_a_time(size: int, ttl: float) -> None:
    """remember_all evicts before each insert, as remember did span by span: even a size or
    age bound of zero keeps the latest span, so its immediate re-delivery is a duplicate."""
    now = [100.0]
    batch, single = SpanDeduper(size, ttl, lambda: now[0]), SpanDeduper(size, ttl, lambda: now[0])
    keys = [bytes([n]) * 24 for n in range(5)]
    batch.remember_all((k, 7) for k in keys)
    for k in keys:
        single.remember(k, 7)
    assert [batch.check(k, 7) for k in keys] == [single.check(k, 7) for k in keys]
    assert batch.check(keys[-1], 7) == "duplicate" and batch.evictions == single.evictions
