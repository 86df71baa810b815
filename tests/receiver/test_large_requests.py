"""Large requests are decoded (and filtered) off the event loop; small ones stay on it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from otel_loopguard.receiver.front import service

from .agent import LOOP, encode, record_spans
from .harness import RUN, ReceiverThread, Sink, export_stub, make_config, wait_for


@pytest.fixture
def decode_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Thread ids the real decode ran in (a spy around it, not a stand-in)."""
    seen: list[int] = []
    real = service.parse_request

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(service, "parse_request", spy)
    return seen


@pytest.mark.parametrize("large", [False, True])
def test_decode_runs_off_the_event_loop_only_for_large_requests(
    sink: Sink, decode_threads: list[int], monkeypatch: pytest.MonkeyPatch, large: bool
) -> None:
    _, spans = record_spans(LOOP)
    request = encode(spans)
    size = len(request.SerializeToString())
    # The threshold moved around this request's size instead of building megabytes in a test.
    monkeypatch.setattr(service, "LARGE_REQUEST_BYTES", size if large else size + 1)
    receiver = ReceiverThread(make_config(sink.port))
    loop_thread = receiver.sync(threading.get_ident)
    try:
        channel, stub = export_stub(receiver.port)
        stub.Export(request, timeout=10)
        stub.Export(request, timeout=10)  # a re-delivery: dropped whole, nothing forwarded again
        channel.close()
        wait_for(lambda: sink.runs(), what="run summary")
        assert len(decode_threads) == 2
        assert all((t != loop_thread) == large for t in decode_threads)
        # Same outcome either way: every span once, the loop found.
        assert len([s for s in sink.spans() if not s.name.startswith("loopguard.")]) == 13
        assert receiver.running.metrics.get("duplicates_total") == 13
    finally:
        receiver.stop()


def test_a_large_malformed_request_is_still_refused_cleanly(sink: Sink, monkeypatch: pytest.MonkeyPatch) -> None:
    import grpc

    monkeypatch.setattr(service, "LARGE_REQUEST_BYTES", 16)
    receiver = ReceiverThread(make_config(sink.port))
    try:
        channel, stub = export_stub(receiver.port)
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as err:
            export(b"\x0a\xff\xff\xff\xff\x0f" + b"x" * 64, timeout=10)
        channel.close()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert receiver.running.metrics.get("invalid_requests_total") == 1
    finally:
        receiver.stop()


def test_a_large_requests_records_are_freed_a_piece_at_a_time() -> None:
    """Freed at once, 100,000 spans' records held every sender up for about 0.1 s."""
    import asyncio

    async def main() -> None:
        first, second = list(range(1000)), list(range(1000))
        service._free_later(b"x" * service.LARGE_REQUEST_BYTES, first, second)
        assert len(first) == 1000  # nothing before the handler has returned
        await asyncio.sleep(0)
        assert len(first) == len(second) == 1000 - service.PIECE_SPANS  # one piece a turn of the loop
        for _ in range(1000 // service.PIECE_SPANS):
            await asyncio.sleep(0)
        assert first == second == []
        small = list(range(10))
        service._free_later(b"x", small)  # a small request's are freed as they always were
        await asyncio.sleep(0)
        assert small == list(range(10))

    asyncio.run(main())
