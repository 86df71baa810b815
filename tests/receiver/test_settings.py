"""Receiver settings an operator gets wrong: each a one-line error naming the setting, never a
traceback, a silently different value, or a second process quietly sharing a port."""

from __future__ import annotations

import math
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from otel_loopguard.receiver.config import ConfigError, ReceiverConfig, from_sources
from otel_loopguard.receiver.ops.metrics import Metrics

from .harness import ReceiverThread, Sink, make_config
from .test_cli import ROOT, _env, _free_port, _serve, _wait_serving

FORWARD = {"forward": "127.0.0.1:4317"}


@pytest.mark.parametrize("flags,setting", [
    ({"listen": "127.0.0.1:99999"}, "listen"),  # would wrap around to port 34463
    ({"listen": "127.0.0.1:-1"}, "listen"),
    ({"forward": "127.0.0.1:0"}, "forward"),
    ({"forward": "127.0.0.1:70000"}, "forward"),
    ({"metrics_listen": "foo"}, "metrics_listen"),
    ({"metrics_listen": "127.0.0.1:65536"}, "metrics_listen"),
    ({"max_receive_bytes": 2**32}, "max_receive_bytes"),  # gRPC's option is a 32-bit count
    ({"max_receive_bytes": 0}, "max_receive_bytes"),  # would refuse every request
    ({"gap_wait_seconds": math.nan}, "gap_wait_seconds"),
    ({"max_open_runs": 0}, "max_open_runs"),  # would answer UNAVAILABLE forever
    ({"max_buffered_calls": 0}, "max_buffered_calls"),
    ({"dedupe_size": 0}, "dedupe_size"),  # would forward every re-delivery again
    ({"forward_timeout_seconds": 0.0}, "forward_timeout_seconds"),
    ({"idle_timeout_seconds": math.inf}, "idle_timeout_seconds"),  # runs would never complete on idle
    ({"gap_wait_seconds": math.inf}, "gap_wait_seconds"),
])
def test_out_of_range_settings_are_refused_naming_the_setting(flags: dict, setting: str) -> None:
    with pytest.raises(ConfigError, match=setting):
        from_sources({**FORWARD, **flags}, env={})


@pytest.mark.parametrize("text,setting", [
    ("listen:\n", "listen"),  # an empty value is not the default, nor None in its place
    ("max_receive_bytes:\n", "max_receive_bytes"),
    ("gap_wait_seconds: true\n", "gap_wait_seconds"),  # a bool is no number
    ("max_open_runs: 1.9\n", "max_open_runs"),  # not silently 1
    ("listen: 4327\n", "listen"),  # a number is no address
    ("gap_wait_seconds: .nan\n", "gap_wait_seconds"),
])
def test_config_file_values_of_the_wrong_kind_are_refused(tmp_path: Path, text: str, setting: str) -> None:
    path = tmp_path / "receiver.yaml"
    path.write_text("forward: 127.0.0.1:4317\n" + text)
    with pytest.raises(ConfigError, match=setting):
        from_sources({}, env={}, config_file=str(path))


def test_whole_numbers_written_as_floats_and_optional_settings_left_empty_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "receiver.yaml"
    path.write_text("forward: 127.0.0.1:4317\nmax_open_runs: 2.0\nmetrics_listen:\nlisten: '[::1]:0'\n")
    config = from_sources({}, env={}, config_file=str(path))
    assert config.max_open_runs == 2 and config.metrics_listen is None and config.listen == "[::1]:0"


@pytest.mark.parametrize("url", ["http://collector:abc", "http://collector:0", "http://collector:70000"])
def test_an_otlp_endpoint_with_a_bad_port_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_ENDPOINT.*port"):
        from_sources({"findings_only": True}, env={"OTEL_EXPORTER_OTLP_ENDPOINT": url})


def test_the_key_file_variable_loses_to_the_key_variable_as_in_the_processor_and_the_audit(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("a-key-in-a-file-0123456789")
    env = {"OTEL_LOOPGUARD_KEY_FILE": str(key_file), "OTEL_LOOPGUARD_KEY": "the-key-in-the-env-0123456789"}
    assert from_sources(FORWARD, env=env).key_file is None  # so load_key() applies its own precedence
    assert from_sources({**FORWARD, "key_file": str(key_file)}, env=env).key_file == str(key_file)  # a flag wins


def test_the_environments_key_beats_the_config_files_key_file_as_any_setting(tmp_path: Path) -> None:
    path = tmp_path / "receiver.yaml"
    path.write_text("forward: 127.0.0.1:4317\nkey_file: /etc/loopguard/key\n")
    assert from_sources({}, env={}, config_file=str(path)).key_file == "/etc/loopguard/key"
    for var in ("OTEL_LOOPGUARD_KEY", "OTEL_LOOPGUARD_KEY_FILE"):
        assert from_sources({}, env={var: "x" * 20}, config_file=str(path)).key_file is None  # load_key() reads env
    assert from_sources({"key_file": "/flag/key"}, env={"OTEL_LOOPGUARD_KEY": "x" * 20},
                        config_file=str(path)).key_file == "/flag/key"  # a flag beats both


def test_findings_only_from_the_environment_can_be_turned_off_by_flag() -> None:
    env = {"OTEL_LOOPGUARD_FINDINGS_ONLY": "true"}
    assert from_sources(FORWARD, env=env).findings_only
    from otel_loopguard.cli import _parser

    args = _parser().parse_args(["serve", "--no-findings-only", "--forward", "127.0.0.1:4317"])
    assert args.findings_only is False
    assert not from_sources({"findings_only": args.findings_only, **FORWARD}, env=env).findings_only


def test_counters_keep_every_digit() -> None:
    metrics = Metrics()
    metrics.inc("spans_received_total", 1_234_568)
    metrics.inc("findings_total", 3, kind="repeat", tool="lookup_order")
    text = metrics.render()
    assert "otel_loopguard_spans_received_total 1234568\n" in text
    assert 'otel_loopguard_findings_total{kind="repeat",tool="lookup_order"} 3\n' in text


def test_a_second_receiver_on_a_port_in_use_exits_2_instead_of_sharing_it(sink: Sink) -> None:
    first = ReceiverThread(make_config(sink.port))
    try:
        proc = _serve("--listen", f"127.0.0.1:{first.port}", "--forward", f"127.0.0.1:{sink.port}")
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 2, err
        assert f"cannot listen on 127.0.0.1:{first.port} (the port is in use" in err and "Traceback" not in err
        assert "Failed to add port" not in err, err  # gRPC's C-core line before ours: gone
    finally:
        first.stop()


def test_a_metrics_port_in_use_exits_2_cleanly_and_leaves_nothing_serving(sink: Sink) -> None:
    taken = _free_port()
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        port = _free_port()
        proc = _serve("--listen", f"127.0.0.1:{port}", "--forward", f"127.0.0.1:{sink.port}",
                      "--metrics-listen", f"127.0.0.1:{taken}")
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and f"cannot serve metrics on 127.0.0.1:{taken}" in err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_a_failed_start_leaves_no_port_bound(sink: Sink) -> None:
    """An embedder (or a test) that retries after a bad metrics address gets its port back."""
    import asyncio
    import socket

    from otel_loopguard.receiver.serve.server import start

    port = _free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        config = make_config(sink.port, listen=f"127.0.0.1:{port}", metrics_listen=f"127.0.0.1:{busy}")
        with pytest.raises(OSError, match="cannot serve metrics"):
            asyncio.run(start(config))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # free again


def test_metrics_on_ipv6_loopback_and_only_get_or_head(sink: Sink) -> None:
    port = _free_port()
    metrics_port = _free_port()
    proc = _serve("--listen", f"127.0.0.1:{port}", "--forward", f"127.0.0.1:{sink.port}",
                  "--metrics-listen", f"[::1]:{metrics_port}")
    try:
        _wait_serving(port, proc)
        url = f"http://[::1]:{metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            assert b"otel_loopguard_spans_received_total 0" in response.read()
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as response:
            assert response.status == 200 and response.read() == b""
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"), timeout=5)
        assert refused.value.code == 405
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert f"metrics on http://[::1]:{metrics_port}/metrics" in err


def test_a_traceback_never_reaches_the_operator_for_bad_flags() -> None:
    for args in (["--metrics-listen", "foo"], ["--max-receive-bytes", "4294967296"], ["--listen", "127.0.0.1:99999"]):
        proc = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "serve", "--forward", "127.0.0.1:4317",
                               *args], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and proc.stderr.startswith("otel-loopguard serve: "), proc.stderr
        assert "Traceback" not in proc.stderr


def test_the_defaults_are_valid() -> None:
    assert ReceiverConfig(forward="127.0.0.1:4317").validate()


@pytest.mark.parametrize("url", ["127.0.0.1:6006", "ftp://phoenix:6006", "http://", "http://h:6006/?x=1", "http://h:99999"])
def test_a_phoenix_url_that_is_no_base_url_is_refused_naming_the_setting(url: str) -> None:
    with pytest.raises(ConfigError, match="annotate_phoenix_url"):
        from_sources({**FORWARD, "annotate_phoenix_url": url}, env={})


def test_the_phoenix_api_key_comes_from_phoenixs_own_variable_and_is_never_shown() -> None:
    secret = "px-" + "k" * 40
    config = from_sources({**FORWARD, "annotate_phoenix_url": "http://127.0.0.1:6006"}, env={"PHOENIX_API_KEY": secret})
    assert config.phoenix_api_key == secret and secret not in repr(config)
    ours = from_sources(FORWARD, env={"PHOENIX_API_KEY": "theirs-" + secret, "OTEL_LOOPGUARD_PHOENIX_API_KEY": secret})
    assert ours.phoenix_api_key == secret  # our own variable wins
    assert from_sources(FORWARD, env={}).annotate_phoenix_url is None  # off by default
