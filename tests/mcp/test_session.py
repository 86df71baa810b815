"""The session's decisions in process: what goes where, which span says what."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.enforce import make_guard
from otel_loopguard.mcp.framing import Piece
from otel_loopguard.mcp.session import TO_CLIENT, TO_SERVER, Session
from otel_loopguard.mcp.spans import CallSpans

KEY = "0123456789abcdef0123456789abcdef"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _session(mode: str) -> tuple[Session, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Session(CallSpans(provider.get_tracer("t"), "s-1"), make_guard(mode=mode, key=KEY)), exporter


def _line(message: Any) -> Piece:
    return Piece(json.dumps(message).encode() + b"\n", whole=True)


def _call(rid: int, meta: Any = None) -> Piece:
    params: dict[str, Any] = {"name": "lookup_order", "arguments": {"order_id": "A-1"}}
    if meta is not None:
        params["_meta"] = meta
    return _line({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def _answer(rid: int) -> Piece:
    return _line({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "pending"}],
                                                           "_meta": {"progressToken": 9}}})


def test_the_span_joins_the_clients_trace_and_leaves_the_results_meta_out() -> None:
    session, exporter = _session("observe")
    request = _call(1, {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"})
    assert session.from_client(request) == (TO_SERVER, request.data)
    assert session.from_server(_answer(1)) == _answer(1).data
    (span,) = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == TRACE
    assert json.loads(span.attributes["gen_ai.tool.call.result"]) == {"content": [{"type": "text", "text": "pending"}]}


def test_enforce_answers_the_fifth_itself_and_observe_never_does() -> None:
    for mode, fifth in (("enforce", TO_CLIENT), ("observe", TO_SERVER)):
        session, exporter = _session(mode)
        for rid in range(1, 5):
            assert session.from_client(_call(rid))[0] == TO_SERVER
            session.from_server(_answer(rid))
        where, data = session.from_client(_call(5))
        assert where == fifth
        if fifth == TO_CLIENT:
            answer = json.loads(data)
            assert answer["id"] == 5 and answer["result"]["isError"] is True
            assert exporter.get_finished_spans()[-1].attributes["loopguard.dispatched"] is False


def test_an_answer_to_an_id_of_another_type_ends_nothing() -> None:
    """JSON-RPC ids 1 and "1" differ: an answer to "1" leaves call 1 open."""
    session, exporter = _session("observe")
    session.from_client(_call(1))
    session.from_server(_line({"jsonrpc": "2.0", "id": "1", "result": {}}))
    assert exporter.get_finished_spans() == ()
    assert len(session.close("server_exit")) == 1
    assert exporter.get_finished_spans()[0].attributes["error.type"] == "server_exit"
