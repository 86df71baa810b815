"""The memory bound's refusals, each beside the request it lets through.

- A request of more spans than max_request_spans, or larger than one request may take under
  memory_limit_mib, is refused for good: RESOURCE_EXHAUSTED, a message saying to send smaller
  batches, no RetryInfo (so OTLP exporters do not retry it), nothing forwarded.
- When the estimate would pass the bound (here: finding spans piling up while the downstream
  is down), a request gets UNAVAILABLE with RetryInfo at once, and is taken once they drained.
"""

from __future__ import annotations

from typing import Iterator

import grpc
import pytest
from google.rpc import error_details_pb2

from otel_loopguard.findings import Finding
from otel_loopguard.findings.otlp import finding_span, place_at
from receiver.harness import ReceiverThread, Sink, app_spans, export_stub, make_config, make_span, request_of, wait_for


@pytest.fixture(autouse=True)
def _digest_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", "reliability-test-key-0123456789")


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.stop()


def _spans(n: int, marker: int, text: str = "") -> list:
    return [make_span(bytes([marker]) * 16, (i + 1).to_bytes(8, "big"), "work", start=10, end=20,
                      attributes={"payload": text} if text else None) for i in range(n)]


def _refused_for_good(err: grpc.RpcError) -> None:
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "send smaller batches" in err.details()
    assert "google.rpc.retryinfo-bin" not in dict(err.trailing_metadata() or ())


@pytest.mark.parametrize("too_big", ["spans", "bytes"])
def test_a_request_over_the_limits_is_refused_for_good_and_one_within_is_taken(sink: Sink, too_big: str) -> None:
    # memory_limit_mib 96: 32 MiB of working bytes, so one request may take 2 MiB
    receiver = ReceiverThread(make_config(sink.port, max_request_spans=5, memory_limit_mib=96))
    channel, stub = export_stub(receiver.port)
    try:
        over = _spans(6, 1) if too_big == "spans" else _spans(1, 1, "x" * (3 << 20))
        within = _spans(5, 2) if too_big == "spans" else _spans(1, 2, "x" * (1 << 20))
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(request_of(over), timeout=10)
        _refused_for_good(caught.value)
        assert ("max_request_spans" if too_big == "spans" else "MiB") in caught.value.details()
        assert receiver.running.metrics.get("requests_too_large_total") == 1
        stub.Export(request_of(within), timeout=10)  # negative control: at the limit, taken
        assert len(app_spans(sink)) == len(within)
        assert receiver.running.metrics.get("requests_too_large_total") == 1
    finally:
        channel.close()
        receiver.stop()


def test_at_the_memory_bound_a_request_waits_with_retryinfo_and_is_taken_once_memory_is_back(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, memory_limit_mib=96, forward_queue_bytes=1 << 20))
    running = receiver.running
    channel, stub = export_stub(receiver.port)
    try:
        stub.Export(request_of(_spans(3, 1)), timeout=10)  # below the bound: taken
        sink.down = True
        finding = Finding(kind="repeat", severity="warn", first_seq=1, last_seq=2, count=2, seqs=(), span_ids=(),
                          reason="held while the downstream is down")
        span = finding_span(finding, [], place_at(b"\x07" * 16, b"", 1, 2))
        # 10,000 finding spans waiting (4 KiB each in the estimate): past 32 MiB of working bytes
        receiver.sync(lambda: running.findings.put([span] * 10_000))
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(request_of(_spans(3, 2)), timeout=10)
        err = caught.value
        assert err.code() == grpc.StatusCode.UNAVAILABLE and "memory bound" in err.details()
        info = error_details_pb2.RetryInfo.FromString(dict(err.trailing_metadata())["google.rpc.retryinfo-bin"])
        assert info.retry_delay.nanos == 200_000_000
        sink.down = False
        wait_for(lambda: receiver.sync(lambda: running.findings.size) == 0, timeout=60, what="findings drained")
        stub.Export(request_of(_spans(3, 2)), timeout=10)  # the retry is taken (answered once queued)
        wait_for(lambda: len(app_spans(sink)) == 6, what="both requests' spans delivered")
    finally:
        channel.close()
        receiver.stop()
