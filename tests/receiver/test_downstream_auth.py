"""The downstream exporter honours the OTLP exporter settings: headers, TLS with a
private CA, mutual TLS, gzip; and header values (API keys) never reach a log line."""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from pathlib import Path
from typing import Any, Optional

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from otel_loopguard.receiver.config import ConfigError, ReceiverConfig, from_sources, parse_headers

from .agent import LOOP, encode, record_spans
from .harness import RUN, ReceiverThread, export_stub, make_config, wait_for
from .pki import make_pki

SECRET = "s3cr3t-api-key/with=odd chars"


# -- a real TLS sink -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A private CA, a server certificate for localhost and a client certificate, as PEM files."""
    return make_pki(tmp_path_factory.mktemp("pki"))


class RecordingSink(trace_service_pb2_grpc.TraceServiceServicer):
    """A downstream that records each request's metadata; TLS (optionally mTLS) when given PEMs."""

    def __init__(self, pki: Optional[dict[str, Path]] = None, require_client_cert: bool = False) -> None:
        self.metadata: list[dict[str, str]] = []
        self.spans: list[Any] = []
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        if pki is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            creds = grpc.ssl_server_credentials(
                [(pki["server_key"].read_bytes(), pki["server_cert"].read_bytes())],
                root_certificates=pki["ca"].read_bytes() if require_client_cert else None,
                require_client_auth=require_client_cert,
            )
            self.port = self.server.add_secure_port("localhost:0", creds)
        self.server.start()

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        with self._lock:
            self.metadata.append({k: v for k, v in context.invocation_metadata() if isinstance(v, str)})
            self.spans += [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        return trace_service_pb2.ExportTraceServiceResponse()

    def runs(self) -> list[Any]:
        with self._lock:
            return [s for s in self.spans if s.name.split(" ", 1)[0] == "loopguard.run"]

    def named(self, name: str) -> list[Any]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def stop(self) -> None:
        self.server.stop(0)


def _send_loop(port: int) -> None:
    _, spans = record_spans(LOOP)
    channel, stub = export_stub(port)
    try:
        stub.Export(encode(spans), timeout=10)
    finally:
        channel.close()


def _config(port: int, host: str = "127.0.0.1", **overrides: Any) -> ReceiverConfig:
    return make_config(port, forward=f"{host}:{port}", **overrides)


# -- headers -------------------------------------------------------------------------------
ENCODED = "Bearer%20" + SECRET.replace("=", "%3D").replace(" ", "%20")


@pytest.mark.parametrize("findings_only", [False, True])
def test_headers_go_with_forwarded_spans_and_findings_and_are_never_logged(
    findings_only: bool, caplog: pytest.LogCaptureFixture
) -> None:
    sink = RecordingSink()
    flags: dict[str, Any] = {"findings_only": findings_only, "root_grace_seconds": 0.2, "listen": "127.0.0.1:0"}
    if findings_only:  # the standard exporter variables, endpoint and headers together
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.port}",
               "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization={ENCODED},x-team=agents"}
    else:  # the receiver's own setting
        flags["forward"] = f"127.0.0.1:{sink.port}"
        env = {"OTEL_LOOPGUARD_HEADERS": f"Authorization={ENCODED},x-team=agents"}
    config = from_sources(flags, env=env)
    caplog.set_level(logging.DEBUG)
    receiver = ReceiverThread(config)
    try:
        _send_loop(receiver.port)
        wait_for(lambda: sink.runs(), what="run summary")
        assert sink.metadata and all(m.get("authorization") == f"Bearer {SECRET}" for m in sink.metadata)
        assert all(m.get("x-team") == "agents" for m in sink.metadata)
        assert len(sink.metadata) >= (2 if not findings_only else 1)  # forwarded spans, then findings
    finally:
        receiver.stop()
        sink.stop()
    assert "authorization" in caplog.text  # the header's name is logged at startup ...
    assert SECRET not in caplog.text and "s3cr3t" not in caplog.text  # ... its value never is
    assert "in plaintext" in caplog.text  # ... with a warning that it travels unencrypted
    assert "s3cr3t" not in repr(config)


# -- TLS -----------------------------------------------------------------------------------
def test_tls_with_a_private_ca_delivers(pki: dict[str, Path]) -> None:
    sink = RecordingSink(pki)
    receiver = ReceiverThread(_config(sink.port, host="localhost", certificate_file=str(pki["ca"])))
    try:
        _send_loop(receiver.port)
        wait_for(lambda: sink.runs(), what="run summary over TLS")
        assert len([s for s in sink.spans if not s.name.startswith("loopguard.")]) == 13  # every app span, once
    finally:
        receiver.stop()
        sink.stop()


def _refused_code(port: int) -> grpc.StatusCode:
    """Send the loop's spans to the receiver and return the status its refusal carries."""
    _, spans = record_spans(LOOP)
    channel, stub = export_stub(port)
    try:
        with pytest.raises(grpc.RpcError) as err:
            stub.Export(encode(spans), timeout=10)
    finally:
        channel.close()
    return err.value.code()


def test_tls_peer_not_trusted_is_refused_back_to_the_sender_not_dropped(pki: dict[str, Path]) -> None:
    """Without the private CA the handshake fails: the sender hears UNAVAILABLE and keeps its spans."""
    sink = RecordingSink(pki)
    receiver = ReceiverThread(_config(sink.port, host="localhost", insecure=False))  # system roots only
    try:
        assert _refused_code(receiver.port) == grpc.StatusCode.UNAVAILABLE
        assert sink.spans == []
        assert receiver.running.metrics.get("spans_received_total") == 0  # nothing was accepted
    finally:
        receiver.stop()
        sink.stop()


def test_mutual_tls_needs_the_client_certificate(pki: dict[str, Path]) -> None:
    sink = RecordingSink(pki, require_client_cert=True)
    with_cert = ReceiverThread(_config(sink.port, host="localhost", certificate_file=str(pki["ca"]),
                                       client_certificate_file=str(pki["client_cert"]),
                                       client_key_file=str(pki["client_key"])))
    try:
        _send_loop(with_cert.port)
        wait_for(lambda: sink.runs(), what="run summary over mTLS")
    finally:
        with_cert.stop()
    without = ReceiverThread(_config(sink.port, host="localhost", certificate_file=str(pki["ca"])))
    try:
        assert _refused_code(without.port) == grpc.StatusCode.UNAVAILABLE
    finally:
        without.stop()
        sink.stop()


def test_gzip_compression_delivers() -> None:
    sink = RecordingSink()
    receiver = ReceiverThread(_config(sink.port, compression="gzip"))
    try:
        _send_loop(receiver.port)
        wait_for(lambda: sink.runs(), what="run summary")
        assert len([s for s in sink.spans if not s.name.startswith("loopguard.")]) == 13
    finally:
        receiver.stop()
        sink.stop()


# -- settings ------------------------------------------------------------------------------
def test_header_syntax_is_the_otlp_exporters() -> None:
    assert parse_headers("Api-Key=a%2Cb,  x-two = two words ,") == (("api-key", "a,b"), ("x-two", "two words"))
    assert parse_headers(None) == () and parse_headers("") == ()


@pytest.mark.parametrize("bad", ["novalue", "=SECRETVALUE", "two words=SECRETVALUE", "grpc-timeout=SECRETVALUE",
                                 "trace-bin=SECRETVALUE"])
def test_bad_headers_are_refused_without_echoing_any_value(bad: str) -> None:
    with pytest.raises(ConfigError, match="headers") as err:
        ReceiverConfig(forward="h:1", headers=f"ok=OTHERVALUE,{bad}").validate()
    assert "SECRETVALUE" not in str(err.value) and "OTHERVALUE" not in str(err.value)


def test_exporter_settings_come_from_the_standard_variables_traces_first() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example", "OTEL_EXPORTER_OTLP_HEADERS": "a=generic",
           "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=traces", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem",
           "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "GZIP"}
    config = from_sources({"findings_only": True}, env=env)
    assert config.forward == "collector.example:4317"
    assert parse_headers(config.headers) == (("a", "traces"),)
    assert config.certificate_file == "/ca.pem" and config.tls and config.compression == "gzip"


def test_standard_variables_of_another_exporter_are_left_alone() -> None:
    """Next to an explicit --forward, OTEL_EXPORTER_OTLP_* configure some other exporter
    (often the app's, with a vendor's key): never sent to our downstream."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://api.vendor.example", "OTEL_EXPORTER_OTLP_HEADERS": "x-key=VENDOR",
           "OTEL_EXPORTER_OTLP_CERTIFICATE": "/vendor-ca.pem"}
    for findings_only in (False, True):
        config = from_sources({"forward": "collector:4317", "findings_only": findings_only}, env=env)
        assert config.headers is None and config.certificate_file is None and not config.tls


def test_certificates_count_only_over_tls_as_in_the_sdk() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem"}
    config = from_sources({"findings_only": True}, env=env)
    assert config.certificate_file is None and not config.tls


def test_the_receivers_own_settings_beat_the_standard_variables() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_HEADERS": "a=generic",
           "OTEL_LOOPGUARD_HEADERS": "a=ours"}
    assert parse_headers(from_sources({"findings_only": True}, env=env).headers) == (("a", "ours"),)
    assert from_sources({"findings_only": True, "compression": "none"},
                        env={**env, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}).compression == "none"


@pytest.mark.parametrize("bad", ["x-key=caf%C3%A9SECRETVALUE", "x-key=line%0ASECRETVALUE", "bad:key=SECRETVALUE"])
def test_headers_grpc_would_refuse_fail_at_startup_not_on_every_export(bad: str) -> None:
    with pytest.raises(ConfigError, match="headers") as err:
        ReceiverConfig(forward="h:1", headers=bad).validate()
    assert "SECRETVALUE" not in str(err.value)


def test_a_yaml_error_never_quotes_the_line(tmp_path: Path) -> None:
    path = tmp_path / "receiver.yaml"
    path.write_text('forward: "h:1"\nheaders: "authorization=Bearer SECRETVALUE\n')
    with pytest.raises(ConfigError, match="not valid YAML at line") as err:
        from_sources({}, env={}, config_file=str(path))
    assert "SECRETVALUE" not in str(err.value)


def test_half_a_client_identity_or_an_unknown_compression_is_refused() -> None:
    with pytest.raises(ConfigError, match="go together"):
        ReceiverConfig(forward="h:1", client_certificate_file="c.pem").validate()
    with pytest.raises(ConfigError, match="compression"):
        ReceiverConfig(forward="h:1", compression="zstd").validate()


def test_unreadable_or_non_pem_files_fail_at_start_naming_the_setting(tmp_path: Path) -> None:
    from otel_loopguard.receiver.out.downstream import channel_credentials

    with pytest.raises(ConfigError, match="certificate_file: cannot read"):
        channel_credentials(ReceiverConfig(forward="h:1", certificate_file=str(tmp_path / "missing.pem")))
    key = tmp_path / "key.txt"
    key.write_text("PRIVATE MATERIAL")
    with pytest.raises(ConfigError) as err:
        channel_credentials(ReceiverConfig(forward="h:1", client_certificate_file=str(key), client_key_file=str(key)))
    assert "not a PEM file" in str(err.value) and "PRIVATE MATERIAL" not in str(err.value)


def test_an_explicitly_secure_downstream_takes_the_standard_certificate() -> None:
    """insecure: false over an http:// endpoint means TLS: the certificate variable then counts."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem",
           "OTEL_LOOPGUARD_INSECURE": "false"}
    config = from_sources({"findings_only": True}, env=env)
    assert config.tls and config.certificate_file == "/ca.pem"
