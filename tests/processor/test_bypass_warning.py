"""install() says so when the app's exporter would send its spans around a local receiver:
the README's obvious setup (`serve --forward 127.0.0.1:4317`, an exporter left on its default
localhost:4317) otherwise loses every judgement without a sign."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_loopguard
from otel_loopguard import local_receivers
from receiver.harness import ReceiverThread, Sink, make_config

BYPASS = "they go around the receiver"


def _provider(endpoint: str) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    return provider


@pytest.mark.real  # starts a process
def test_install_warns_once_when_its_exporter_targets_what_a_receiver_forwards_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_RUNTIME_DIR", str(tmp_path / "run"))
    sink = Sink()
    receiver = ReceiverThread(make_config(sink.port))
    providers: list[TracerProvider] = []
    try:
        (note,) = local_receivers.running()
        assert note["forward"] == f"127.0.0.1:{sink.port}" and note["listen"] == f"127.0.0.1:{receiver.port}"
        with caplog.at_level(logging.WARNING, logger="otel_loopguard.processor"):
            # localhost is 127.0.0.1: the same port on this machine, as the exporter's default is written.
            for endpoint in (f"localhost:{sink.port}", f"http://127.0.0.1:{sink.port}"):
                providers.append(_provider(endpoint))
                otel_loopguard.install(tracer_provider=providers[-1], key="k" * 32)
        warnings = [r.getMessage() for r in caplog.records if BYPASS in r.getMessage()]
        assert len(warnings) == 2, warnings  # one per exporter address, not one per span or per call
        assert f"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{receiver.port}" in warnings[0]
        assert "k" * 32 not in caplog.text

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="otel_loopguard.processor"):
            # Negative controls: through the receiver, and a backend no receiver forwards to.
            for endpoint in (f"127.0.0.1:{receiver.port}", "127.0.0.1:1"):
                providers.append(_provider(endpoint))
                otel_loopguard.install(tracer_provider=providers[-1], key="k" * 32)
        assert BYPASS not in caplog.text
    finally:
        for provider in providers:
            provider.shutdown()
        receiver.stop()
        sink.stop()
    assert local_receivers.running() == []  # the note goes with the receiver


@pytest.mark.parametrize("a, b, same", [
    ("localhost:4317", "127.0.0.1:4317", True),
    ("http://[::1]:4317", "127.0.0.1:4317", True),
    ("127.0.0.1:4317", "127.0.0.1:4327", False),
    ("collector.internal:4317", "127.0.0.1:4317", False),
])
def test_local_addresses_compare_by_port_on_this_machine(a: str, b: str, same: bool) -> None:
    assert local_receivers.same_local_address(a, b) is same
