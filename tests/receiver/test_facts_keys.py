"""Run facts on a span (receiver/ingest/decode.py judge): the check spelt out for speed reads
exactly the keys of _FACTS_KEYS, each alone enough, on every decode path (a key added to the
tuple but not to the spelt-out check would be read on some spans and lost on others)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_loopguard.otlp.values import to_any_value
from otel_loopguard.receiver.ingest import decode as decode_module
from otel_loopguard.receiver.ingest.decoder import decode

VALUES = {"loopguard.termination_reason": "max_turns", "loopguard.terminal_response": True, "loopguard.run.calls": 7}


def _one(attrs: dict[str, Any], name: str = "s") -> Any:
    span = Span(trace_id=b"\x03" * 16, span_id=b"\x04" * 8, name=name, start_time_unix_nano=1, end_time_unix_nano=2,
                attributes=[KeyValue(key=k, value=to_any_value(v)) for k, v in attrs.items()])
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
    return decode(request.SerializeToString()).spans[0]


def test_the_keys_read_are_the_facts_keys() -> None:
    assert set(decode_module._FACTS_KEYS) == set(VALUES)  # noqa: SLF001


@pytest.mark.parametrize("key", sorted(VALUES))
def test_each_facts_key_alone_is_read(key: str) -> None:
    d = _one({key: VALUES[key]})
    assert d.facts == {key: VALUES[key]}


@pytest.mark.parametrize("key", sorted(VALUES))
def test_a_facts_key_on_an_agent_span_is_read_with_the_agent(key: str) -> None:
    d = _one({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", key: VALUES[key]})
    assert d.agent == "planner" and d.facts == {key: VALUES[key]}


def test_no_facts_key_no_facts() -> None:
    assert _one({"loopguard.run.other": 1, "app.x": "y"}).facts is None
