"""A smolagents managed agent's run as a call of that agent, in the receiver (issue 30).

The managed agent runs as an OpenInference AGENT span under its manager's, which lists it; no
tool span records the delegation. The receiver keeps a bounded span tree per open run
(receiver/runs/buffer.py, conventions/delegations.DelegationLinks, fed by both decoders) and,
when the run is judged, counts each candidate its manager lists as a call, as `audit` does.

On the real captures through decode and the run assembly (no server): the delegations are
calls, in order; an agent span under an agent that does not list it is no call; without the
third delegation's span its call is gone; past the bounds nothing is made up; a run the
processor numbered gets none from the tree.
"""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_loopguard.otlp.spans import SpanCollector
from otel_loopguard.otlp.values import to_key_values
from otel_loopguard.receiver.ingest.decoder import decode
from otel_loopguard.receiver.runs import buffer as buffer_module

from tests.frameworks.fw_labels import CAPTURES, request_of
from .harness import judged_alone

KEY = "receiver-delegation-key-0123456789"
MANAGER_LIST = "smolagents.managed_agents.0.name"


def _spans(capture: str = "smol_openinference__delegate") -> list[Span]:
    return list(request_of(CAPTURES / f"{capture}.json").resource_spans[0].scope_spans[0].spans)


def _request(spans: list[Span]) -> bytes:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
                                     ).SerializeToString()


def _judged(spans: list[Span], requests: int = 1) -> tuple[list[str], list[str]]:
    """(the tools of the run's calls in sequence order, the findings' names), the spans sent in
    `requests` requests in their order."""
    calls, names = judged_alone(spans, KEY, requests)
    return [c.tool for c in calls], names


def _audited(spans: list[Span]) -> list[str]:
    collector = SpanCollector()
    collector.add(ExportTraceServiceRequest.FromString(_request(spans)))
    ((_, calls, _, _),) = collector.runs()
    return [c.tool for c in calls]


def _delegations(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s.name == "specialist.run"]


def test_a_managed_agents_runs_are_calls_as_the_audit_counts_them() -> None:
    spans = _spans()
    tools, names = _judged(spans)
    assert tools.count("specialist") == 4
    assert tools == _audited(spans)
    assert "cycle/stop" in names  # the manager asks the specialist again and again


def test_the_order_of_arrival_does_not_matter_in_a_request_nor_end_first_across_requests() -> None:
    spans = _spans()
    expected = _judged(spans)[0]
    assert _judged(spans[::-1])[0] == expected
    # as an SDK exports them: a span after its children, in several requests
    by_end = sorted(spans, key=lambda s: s.end_time_unix_nano)
    assert _judged(by_end, requests=5)[0] == expected


def test_an_agent_span_under_an_agent_that_does_not_list_it_is_no_call() -> None:
    """Negative control: the same spans, the manager's list naming another agent."""
    spans = _spans()
    for span in spans:
        for kv in span.attributes:
            if kv.key == MANAGER_LIST:
                kv.value.string_value = "someone_else"
    tools, _ = _judged(spans)
    assert "specialist" not in tools and tools == _audited(spans)


def test_without_the_third_delegation_its_call_is_gone() -> None:
    """Mutation: the third specialist run's span dropped (its own calls stay)."""
    spans = _spans()
    third = _delegations(spans)[2]
    tools, _ = _judged([s for s in spans if s is not third])
    assert tools.count("specialist") == 3


def test_the_healthy_delegation_is_quiet() -> None:
    tools, names = _judged(_spans("smol_openinference__delegate-ok"))
    assert "specialist" in tools
    assert not [n for n in names if n.split(" ")[0].endswith(("/warn", "/stop"))]


@pytest.mark.parametrize("bound", ["MAX_TREE_LINKS", "MAX_DELEGATIONS"])
def test_past_a_bound_delegations_are_not_counted_never_made_up(bound: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buffer_module, bound, 2)
    tools, names = _judged(_spans())
    assert tools.count("specialist") < 4
    assert set(tools) <= {"lookup_order", "final_answer", "specialist"}


def test_a_run_the_processor_numbered_takes_no_delegation_from_the_tree() -> None:
    spans = _spans()
    seq = 0
    for span in sorted(spans, key=lambda s: s.end_time_unix_nano):
        if any(kv.key == "tool.name" for kv in span.attributes):
            seq += 1
            span.attributes.extend(to_key_values({"loopguard.seq": seq}))
    tools, _ = _judged(spans)
    assert "specialist" not in tools and len(tools) == seq
