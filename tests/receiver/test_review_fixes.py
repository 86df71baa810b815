"""Regression tests for receiver problems found in review: each once lost data or stalled."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from otel_loopguard.receiver.config import ConfigError, from_sources

from .harness import ReceiverThread, Sink, TaggedRun, attr, export_stub, make_config, make_span, request_of, wait_for


def test_a_sequence_number_far_ahead_is_bad_data_not_a_gap_to_materialise(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, gap_wait_seconds=0.2))
    try:
        run = TaggedRun(seed=61)
        channel, stub = export_stub(receiver.port)
        stub.Export(request_of([run.call(1), run.call(10**9)]), timeout=10)
        conflict = wait_for(lambda: [f for f in sink.findings()
                                     if attr(f, "loopguard.finding.kind") == "integrity_conflict"], what="conflict")
        assert "far beyond" in attr(conflict[0], "loopguard.finding.reason")
        # The receiver keeps serving and completing runs.
        other = TaggedRun(seed=62)
        stub.Export(request_of([other.call(1), other.root()]), timeout=10)
        wait_for(lambda: [s for s in sink.runs() if attr(s, "loopguard.run.id") == other.run_id], what="summary")
        channel.close()
    finally:
        receiver.stop()


def test_an_array_valued_marker_attribute_is_just_another_span(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port))
    try:
        odd = make_span(b"\x31" * 16, b"\x32" * 8, "odd", start=1, end=2,
                        attributes={"gen_ai.operation.name": ["execute_tool", "chat"]})
        channel, stub = export_stub(receiver.port)
        stub.Export(request_of([odd]), timeout=10)
        channel.close()
        wait_for(lambda: [s for s in sink.spans() if s.name == "odd"], what="forwarded span")
        assert receiver.running.metrics.get("internal_errors_total") == 0
    finally:
        receiver.stop()


class _SlowSink(Sink):
    def Export(self, request, context):  # noqa: N802
        time.sleep(0.6)
        return super().Export(request, context)


def test_concurrent_requests_are_forwarded_concurrently() -> None:
    slow = _SlowSink()
    receiver = ReceiverThread(make_config(slow.port, forward_timeout_seconds=5.0))
    try:
        runs = [TaggedRun(seed=70 + i) for i in range(4)]
        errors: list[BaseException] = []

        def send(run: TaggedRun) -> None:
            channel, stub = export_stub(receiver.port)
            try:
                stub.Export(request_of([run.call(1)]), timeout=10)
            except grpc.RpcError as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                channel.close()

        threads = [threading.Thread(target=send, args=(r,)) for r in runs]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        elapsed = time.monotonic() - t0
        assert errors == []
        assert len(slow.spans()) == 4
        # Serialised forwarding would take 4 x 0.6 s; concurrent takes about one.
        assert elapsed < 4 * 0.6
    finally:
        receiver.stop()
        slow.stop()


def test_a_completed_run_id_opens_a_new_run_after_the_late_cache_expires(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port, idle_timeout_seconds=0.3, late_cache_seconds=0.5))
    try:
        first = TaggedRun(run_id="conversation-9", seed=81)
        channel, stub = export_stub(receiver.port)
        stub.Export(request_of([first.call(1)]), timeout=10)
        wait_for(lambda: sink.runs(), what="first summary")
        time.sleep(0.7)  # past late_cache_seconds
        later = TaggedRun(run_id="conversation-9", seed=82)
        stub.Export(request_of([later.call(1)]), timeout=10)
        channel.close()
        wait_for(lambda: len(sink.runs()) == 2, what="a second run for the same id")
        assert receiver.running.metrics.get("late_spans_total") == 0
    finally:
        receiver.stop()


@pytest.mark.parametrize(
    "url, forward, insecure",
    [
        ("http://collector:4317", "collector:4317", True),
        ("https://collector.example", "collector.example:4317", False),
        ("collector:14317", "collector:14317", True),
    ],
)
def test_findings_only_endpoint_follows_the_otlp_settings(url: str, forward: str, insecure: bool) -> None:
    config = from_sources({"findings_only": True}, env={"OTEL_EXPORTER_OTLP_ENDPOINT": url})
    assert (config.forward, config.insecure) == (forward, insecure)


def test_an_otlp_http_path_is_refused_with_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="has a path"):
        from_sources({"findings_only": True}, env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})


def test_findings_only_takes_forward_as_its_destination() -> None:
    import argparse

    from otel_loopguard.receiver.serve.command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--findings-only", "--forward", "backend:4317"])
    config = from_sources({k: v for k, v in vars(args).items() if k != "config"}, env={})
    assert (config.findings_only, config.forward) == (True, "backend:4317")


def test_finding_spans_routed_back_are_forwarded_but_never_judged(sink: Sink) -> None:
    receiver = ReceiverThread(make_config(sink.port))
    try:
        run = TaggedRun(seed=91)
        channel, stub = export_stub(receiver.port)
        stub.Export(request_of([run.call(s) for s in range(1, 6)] + [run.root()]), timeout=10)
        findings = wait_for(lambda: [f for f in sink.findings()
                                     if attr(f, "loopguard.finding.severity") == "stop"], what="stop finding")
        before = len(sink.findings())
        stub.Export(request_of(findings), timeout=10)  # a pipeline loop sends them back
        channel.close()
        time.sleep(1.0)
        assert len(sink.findings()) == before + len(findings)  # forwarded once, nothing new
        assert [s for s in sink.runs() if attr(s, "loopguard.run.id") != run.run_id] == []
    finally:
        receiver.stop()
