"""Only who belongs: TLS, mutual TLS and bearer tokens on `serve --listen` and /metrics,
with real gRPC clients, the real OTLP exporter and real certificates; reloads without a restart."""

from __future__ import annotations

import logging
import shutil
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from otel_loopguard.receiver.config import ConfigError, ReceiverConfig, from_sources
from otel_loopguard.receiver.ops.security import UNAUTHENTICATED_MESSAGE

from .agent import LOOP, encode, record_spans
from .harness import RUN, ReceiverThread, Sink, app_spans, findings_of, make_config, wait_for
from .pki import make_pki

TOKEN = "tok-0123456789abcdef-CURRENT"
OLD_TOKEN = "tok-fedcba9876543210-OLD"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_pki(tmp_path_factory.mktemp("pki"), "ca1")


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_pki(tmp_path_factory.mktemp("pki2"), "ca2")


def _receiver(sink: Sink, pki: Optional[dict[str, Path]] = None, *, mutual: bool = False,
              **overrides: Any) -> ReceiverThread:
    if pki is not None:
        overrides.update(tls_cert_file=str(pki["server_cert"]), tls_key_file=str(pki["server_key"]))
        if mutual:
            overrides["tls_client_ca_file"] = str(pki["ca"])
    return ReceiverThread(make_config(sink.port, **overrides).validate())


def _channel(port: int, ca: Optional[Path] = None, client: Optional[dict[str, Path]] = None) -> grpc.Channel:
    if ca is None:
        return grpc.insecure_channel(f"127.0.0.1:{port}")
    creds = grpc.ssl_channel_credentials(
        root_certificates=ca.read_bytes(),
        private_key=client["client_key"].read_bytes() if client else None,
        certificate_chain=client["client_cert"].read_bytes() if client else None,
    )
    return grpc.secure_channel(f"127.0.0.1:{port}", creds)


def _export(channel: grpc.Channel, token: Optional[str] = None) -> Optional[grpc.RpcError]:
    """One looping run; the error, or None when the receiver accepted it."""
    _, spans = record_spans(LOOP)
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    try:
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(encode(spans), metadata=metadata, timeout=5)
        return None
    except grpc.RpcError as err:
        return err
    finally:
        channel.close()


# -- TLS and mutual TLS --------------------------------------------------------------------
def test_tls_refuses_a_plaintext_client_and_serves_one_that_trusts_the_ca(sink: Sink, pki: dict[str, Path],
                                                                          other_pki: dict[str, Path]) -> None:
    receiver = _receiver(sink, pki)
    try:
        err = _export(_channel(receiver.port))
        assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE  # plaintext: no handshake
        err = _export(_channel(receiver.port, other_pki["ca"]))
        assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE  # a client trusting another CA
        assert sink.spans() == []
        assert _export(_channel(receiver.port, pki["ca"])) is None
        wait_for(lambda: findings_of(sink, kind="repeat"), what="the loop judged over TLS")
    finally:
        receiver.stop()


def test_mutual_tls_refuses_a_client_without_a_certificate_or_with_a_stranger_s(
        sink: Sink, pki: dict[str, Path], other_pki: dict[str, Path]) -> None:
    receiver = _receiver(sink, pki, mutual=True)
    try:
        err = _export(_channel(receiver.port, pki["ca"]))  # trusts the server, shows no certificate
        assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE
        err = _export(_channel(receiver.port, pki["ca"], other_pki))  # a certificate from another CA
        assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE
        assert sink.spans() == []
        assert _export(_channel(receiver.port, pki["ca"], pki)) is None
        wait_for(lambda: sink.runs() or findings_of(sink), what="spans of the certified client")
    finally:
        receiver.stop()


def test_reload_swaps_the_certificate_without_dropping_the_server(tmp_path: Path, sink: Sink, pki: dict[str, Path],
                                                                  other_pki: dict[str, Path]) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki["server_cert"], cert)
    shutil.copy(pki["server_key"], key)
    receiver = ReceiverThread(make_config(sink.port, tls_cert_file=str(cert), tls_key_file=str(key)).validate())
    try:
        err = _export(_channel(receiver.port, other_pki["ca"]))
        assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE  # negative control: not yet
        held = _channel(receiver.port, pki["ca"])  # a connection made before the swap
        assert _export_keep(held) is None
        shutil.copy(other_pki["server_cert"], cert)
        shutil.copy(other_pki["server_key"], key)
        receiver.sync(receiver.running.reload)  # what SIGHUP calls
        assert _export(_channel(receiver.port, other_pki["ca"])) is None  # trusts only the new CA
        err = _export(_channel(receiver.port, pki["ca"]))
        assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE  # the old one is gone
        assert _export_keep(held) is None  # the open connection was not dropped
        held.close()
    finally:
        receiver.stop()


def _export_keep(channel: grpc.Channel) -> Optional[grpc.RpcError]:
    _, spans = record_spans(LOOP)
    try:
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(encode(spans), timeout=5)
        return None
    except grpc.RpcError as err:
        return err


def test_certificates_and_tokens_written_in_place_are_taken_without_a_signal(tmp_path: Path, sink: Sink,
                                                                             pki: dict[str, Path],
                                                                             other_pki: dict[str, Path]) -> None:
    cert, key, tokens = tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "tokens"
    shutil.copy(pki["server_cert"], cert)
    shutil.copy(pki["server_key"], key)
    tokens.write_text(OLD_TOKEN + "\n", encoding="utf-8")
    receiver = ReceiverThread(make_config(sink.port, tls_cert_file=str(cert), tls_key_file=str(key),
                                          auth_token_file=str(tokens), reload_poll_seconds=0.05).validate())
    try:
        assert _export(_channel(receiver.port, pki["ca"]), OLD_TOKEN) is None
        # As cert-manager or a hand copy would: the certificate first, the key a moment later.
        shutil.copy(other_pki["server_cert"], cert)
        time.sleep(0.2)
        shutil.copy(other_pki["server_key"], key)
        tokens.write_text(TOKEN + "\n", encoding="utf-8")
        wait_for(lambda: _export(_channel(receiver.port, other_pki["ca"]), TOKEN) is None,
                 what="the new certificate and token taken from the files")
        err = _export(_channel(receiver.port, other_pki["ca"]), OLD_TOKEN)
        assert err is not None and err.code() == grpc.StatusCode.UNAUTHENTICATED
        # The half-written pair was refused, not used.
        assert receiver.running.metrics.get("reload_failures_total", setting="tls") >= 1
    finally:
        receiver.stop()


def test_reload_swaps_the_client_ca_of_mutual_tls_on_grpc_and_metrics(tmp_path: Path, sink: Sink,
                                                                      pki: dict[str, Path],
                                                                      other_pki: dict[str, Path]) -> None:
    files = {name: tmp_path / name for name in ("tls.crt", "tls.key", "clients.pem")}
    for name, source in zip(files, ("server_cert", "server_key", "ca")):
        shutil.copy(pki[source], files[name])
    receiver = ReceiverThread(make_config(sink.port, tls_cert_file=str(files["tls.crt"]),
                                          tls_key_file=str(files["tls.key"]),
                                          tls_client_ca_file=str(files["clients.pem"]),
                                          metrics_listen="127.0.0.1:0").validate())
    url = f"https://127.0.0.1:{receiver.running.metrics_port}/metrics"

    def scrape(members: dict[str, Path]) -> int:
        context = ssl.create_default_context(cafile=str(members["ca"]))
        context.load_cert_chain(members["client_cert"], members["client_key"])
        return _get(url, context)[0]

    try:
        assert _export(_channel(receiver.port, pki["ca"], pki)) is None and scrape(pki) == 200
        for name, source in zip(files, ("server_cert", "server_key", "ca")):
            shutil.copy(other_pki[source], files[name])
        receiver.sync(receiver.running.reload)
        assert _export(_channel(receiver.port, other_pki["ca"], other_pki)) is None and scrape(other_pki) == 200
        # A client of the old CA, trusting the new server, is refused on both.
        err = _export(_channel(receiver.port, other_pki["ca"], pki))
        assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE
        old_client = ssl.create_default_context(cafile=str(other_pki["ca"]))
        old_client.load_cert_chain(pki["client_cert"], pki["client_key"])
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            _get(url, old_client)
    finally:
        receiver.stop()


def test_a_bad_certificate_on_reload_keeps_the_old_one(tmp_path: Path, sink: Sink, pki: dict[str, Path],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki["server_cert"], cert)
    shutil.copy(pki["server_key"], key)
    receiver = ReceiverThread(make_config(sink.port, tls_cert_file=str(cert), tls_key_file=str(key)).validate())
    try:
        key.write_bytes(b"-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
        with caplog.at_level(logging.ERROR, logger="otel_loopguard.receiver"):
            receiver.sync(receiver.running.reload)
        assert any("keeping the TLS certificates in use" in r.getMessage() and "tls_key_file" in r.getMessage()
                   for r in caplog.records)
        assert "broken" not in caplog.text
        assert receiver.running.metrics.get("reload_failures_total", setting="tls") == 1
        assert _export(_channel(receiver.port, pki["ca"])) is None  # still serving the old certificate
    finally:
        receiver.stop()


# -- bearer tokens -------------------------------------------------------------------------
def test_wrong_or_missing_token_is_unauthenticated_and_nothing_is_judged_or_forwarded(
        sink: Sink, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = _receiver(sink, auth_tokens=f"{OLD_TOKEN},{TOKEN}")
    try:
        errors = [_export(_channel(receiver.port), token) for token in (None, "not-the-token-0123456789", TOKEN + "x")]
        for err in errors:
            assert err is not None and err.code() == grpc.StatusCode.UNAUTHENTICATED
            assert err.details() == UNAUTHENTICATED_MESSAGE
        # Another scheme with the right token is refused too: the header is `Bearer <token>`.
        channel = _channel(receiver.port)
        _, spans = record_spans(LOOP)
        with pytest.raises(grpc.RpcError) as refused:
            trace_service_pb2_grpc.TraceServiceStub(channel).Export(
                encode(spans), metadata=(("authorization", f"Basic {TOKEN}"),), timeout=5)
        channel.close()
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        running = receiver.running
        assert running.metrics.get("unauthenticated_total") == 4
        assert running.metrics.get("spans_received_total") == 0 and not running.assembler.runs
        assert sink.spans() == []
        # Both tokens of a rotation are accepted.
        assert _export(_channel(receiver.port), OLD_TOKEN) is None
        assert _export(_channel(receiver.port), TOKEN) is None
        wait_for(lambda: len(sink.runs()) == 2, what="both runs judged")
        assert len(app_spans(sink)) == 2 * len(record_spans(LOOP)[1])
    finally:
        receiver.stop()
    for secret in (TOKEN, OLD_TOKEN, "tok-0123456789abcdef", "not-the-token"):
        assert secret not in caplog.text
    # Four refusals, one line: the log is no megaphone for strangers (a line a minute at most).
    assert caplog.text.count("refused a request without a valid bearer token from") == 1


def test_the_health_service_needs_no_token(sink: Sink) -> None:
    receiver = _receiver(sink, auth_tokens=TOKEN)
    try:
        channel = _channel(receiver.port)
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        channel.close()
        assert status.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        receiver.stop()


def test_token_rotation_by_reload_from_the_token_file(tmp_path: Path, sink: Sink) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# rotation: old and new\n{OLD_TOKEN}\n\n", encoding="utf-8")
    receiver = _receiver(sink, auth_token_file=str(tokens))
    try:
        assert _export(_channel(receiver.port), OLD_TOKEN) is None
        err = _export(_channel(receiver.port), TOKEN)
        assert err is not None and err.code() == grpc.StatusCode.UNAUTHENTICATED
        tokens.write_text(f"{TOKEN}\n", encoding="utf-8")
        receiver.sync(receiver.running.reload)
        assert _export(_channel(receiver.port), TOKEN) is None
        err = _export(_channel(receiver.port), OLD_TOKEN)
        assert err is not None and err.code() == grpc.StatusCode.UNAUTHENTICATED
        tokens.write_text("# emptied by mistake\n", encoding="utf-8")
        receiver.sync(receiver.running.reload)  # refused: auth is never turned off by a reload
        assert _export(_channel(receiver.port), TOKEN) is None
        err = _export(_channel(receiver.port))
        assert err is not None and err.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        receiver.stop()


def test_the_real_otlp_exporter_over_tls_with_a_token_end_to_end(sink: Sink, pki: dict[str, Path]) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    receiver = _receiver(sink, pki, mutual=True, auth_tokens=TOKEN)
    creds = grpc.ssl_channel_credentials(pki["ca"].read_bytes(), pki["client_key"].read_bytes(),
                                         pki["client_cert"].read_bytes())
    try:
        _, spans = record_spans(LOOP)
        wrong = OTLPSpanExporter(endpoint=f"localhost:{receiver.port}", credentials=creds,
                                 headers={"authorization": "Bearer not-the-token-0123456789"}, timeout=5)
        assert wrong.export(spans) == SpanExportResult.FAILURE  # UNAUTHENTICATED is not retried
        wrong.shutdown()
        assert sink.spans() == []
        exporter = OTLPSpanExporter(endpoint=f"localhost:{receiver.port}", credentials=creds,
                                    headers={"authorization": f"Bearer {TOKEN}"}, timeout=5)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
        wait_for(lambda: sink.runs(), what="the run summary")
        assert findings_of(sink, kind="repeat") and len(app_spans(sink)) == len(spans)
    finally:
        receiver.stop()


# -- /metrics ------------------------------------------------------------------------------
def _get(url: str, context: Optional[ssl.SSLContext] = None, token: Optional[str] = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_metrics_get_the_same_tls_and_token(sink: Sink, pki: dict[str, Path], other_pki: dict[str, Path]) -> None:
    receiver = _receiver(sink, pki, auth_tokens=TOKEN, metrics_listen="127.0.0.1:0")
    url = f"https://127.0.0.1:{receiver.running.metrics_port}/metrics"
    trusting = ssl.create_default_context(cafile=str(pki["ca"]))
    try:
        assert _get(url, trusting, TOKEN)[0] == 200 and "otel_loopguard_unauthenticated_total 0" in _get(url, trusting, TOKEN)[1]
        status, body = _get(url, trusting)
        assert status == 401 and "otel_loopguard" not in body
        assert _get(url, trusting, "not-the-token-0123456789")[0] == 401
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plaintext HTTP gets no answer from TLS
            _get(url.replace("https", "http"))
        with pytest.raises(urllib.error.URLError):  # nor does a client that trusts another CA
            _get(url, ssl.create_default_context(cafile=str(other_pki["ca"])), TOKEN)
    finally:
        receiver.stop()


def test_metrics_with_mutual_tls_need_a_client_certificate(sink: Sink, pki: dict[str, Path],
                                                          other_pki: dict[str, Path]) -> None:
    receiver = _receiver(sink, pki, mutual=True, metrics_listen="127.0.0.1:0")
    url = f"https://127.0.0.1:{receiver.running.metrics_port}/metrics"
    try:
        anonymous = ssl.create_default_context(cafile=str(pki["ca"]))
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            _get(url, anonymous)
        stranger = ssl.create_default_context(cafile=str(pki["ca"]))
        stranger.load_cert_chain(other_pki["client_cert"], other_pki["client_key"])
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            _get(url, stranger)
        member = ssl.create_default_context(cafile=str(pki["ca"]))
        member.load_cert_chain(pki["client_cert"], pki["client_key"])
        assert _get(url, member)[0] == 200
    finally:
        receiver.stop()


def test_metrics_tls_follows_a_certificate_reload(tmp_path: Path, sink: Sink, pki: dict[str, Path],
                                                  other_pki: dict[str, Path]) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki["server_cert"], cert)
    shutil.copy(pki["server_key"], key)
    receiver = ReceiverThread(make_config(sink.port, tls_cert_file=str(cert), tls_key_file=str(key),
                                          metrics_listen="127.0.0.1:0").validate())
    url = f"https://127.0.0.1:{receiver.running.metrics_port}/metrics"
    try:
        new_ca = ssl.create_default_context(cafile=str(other_pki["ca"]))
        with pytest.raises(urllib.error.URLError):
            _get(url, new_ca)
        shutil.copy(other_pki["server_cert"], cert)
        shutil.copy(other_pki["server_key"], key)
        receiver.sync(receiver.running.reload)
        assert _get(url, new_ca)[0] == 200
    finally:
        receiver.stop()


# -- bad settings --------------------------------------------------------------------------
def test_bad_tls_and_token_settings_stop_startup_naming_the_setting(tmp_path: Path, sink: Sink,
                                                                     pki: dict[str, Path],
                                                                     other_pki: dict[str, Path]) -> None:
    def fails(**overrides: Any) -> str:
        with pytest.raises(ConfigError) as err:
            ReceiverThread(make_config(sink.port, **overrides).validate()).stop()
        return str(err.value)

    missing = str(tmp_path / "nope.pem")
    assert fails(tls_cert_file=missing, tls_key_file=str(pki["server_key"])).startswith("tls_cert_file: cannot read")
    assert "tls_key_file and" not in fails(tls_cert_file=str(pki["server_cert"]), tls_key_file=missing)
    assert fails(tls_cert_file=str(pki["server_cert"]), tls_key_file=missing).startswith("tls_key_file: cannot read")
    mismatch = fails(tls_cert_file=str(pki["server_cert"]), tls_key_file=str(other_pki["server_key"]))
    assert mismatch.startswith("tls_cert_file / tls_key_file:") and "-----BEGIN" not in mismatch
    assert fails(tls_cert_file=str(pki["server_cert"]), tls_key_file=str(pki["server_key"]),
                 tls_client_ca_file=missing).startswith("tls_client_ca_file: cannot read")
    with pytest.raises(ConfigError, match="tls_cert_file and tls_key_file go together"):
        make_config(sink.port, tls_cert_file=str(pki["server_cert"])).validate()
    with pytest.raises(ConfigError, match="tls_client_ca_file needs tls_cert_file"):
        make_config(sink.port, tls_client_ca_file=str(pki["ca"])).validate()
    empty = tmp_path / "tokens"
    empty.write_text("# nothing yet\n", encoding="utf-8")
    assert "holds no token" in fails(auth_token_file=str(empty))
    short = "short token!"
    message = fails(auth_tokens=f"{TOKEN},{short}")
    assert message.startswith("auth_tokens: entry 2:") and short not in message and TOKEN not in message
    assert fails(auth_tokens=" , ").startswith("auth_tokens: no token")


def test_tokens_come_from_the_environment_and_never_show_in_the_settings_or_their_errors(tmp_path: Path,
                                                                                       sink: Sink) -> None:
    config = from_sources({"forward": f"127.0.0.1:{sink.port}"}, env={"OTEL_LOOPGUARD_AUTH_TOKENS": TOKEN})
    assert config.auth_tokens == TOKEN and TOKEN not in repr(config)
    settings = tmp_path / "serve.yaml"
    settings.write_text(f"auth_tokens: [{TOKEN}]\n", encoding="utf-8")  # a list where text belongs
    with pytest.raises(ConfigError) as err:
        from_sources({"forward": f"127.0.0.1:{sink.port}"}, env={}, config_file=str(settings))
    assert "auth_tokens must be text" in str(err.value) and TOKEN not in str(err.value)
    assert isinstance(config, ReceiverConfig)


def test_an_open_listen_address_is_warned_about_unless_tls_and_tokens_guard_it(sink: Sink, pki: dict[str, Path],
                                                                               caplog: pytest.LogCaptureFixture) -> None:
    def warnings(**overrides: Any) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="otel_loopguard.receiver"):
            ReceiverThread(make_config(sink.port, listen="0.0.0.0:0", **overrides).validate()).stop()
        return [r.getMessage() for r in caplog.records if "is not loopback" in r.getMessage()]

    assert any("neither a token nor a client certificate" in w for w in warnings())
    assert any("tokens cross the network in plaintext" in w for w in warnings(auth_tokens=TOKEN))
    tls = {"tls_cert_file": str(pki["server_cert"]), "tls_key_file": str(pki["server_key"])}
    assert any("anyone who reaches it" in w for w in warnings(**tls))  # TLS alone admits any client
    assert warnings(auth_tokens=TOKEN, **tls) == []
    assert warnings(tls_client_ca_file=str(pki["ca"]), **tls) == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="otel_loopguard.receiver"):
        ReceiverThread(make_config(sink.port).validate()).stop()  # loopback: nothing to warn about
    assert not [r for r in caplog.records if "is not loopback" in r.getMessage()]
