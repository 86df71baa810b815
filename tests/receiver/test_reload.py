"""Policy reload without a restart: checked before it replaces the running one; new runs get
the new policy, open runs keep theirs; each finding names the version that judged it."""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from .harness import FINDING, ReceiverThread, Sink, TaggedRun, attr, export_stub, make_config, request_of, wait_for
from .test_cli import _free_port, _serve, _wait_serving

V1 = "version: v1\nrepeat: {warn_at: 3, stop_at: 5}\n"
V2 = "version: v2\nrepeat: {warn_at: 2, stop_at: 3}\n"


def _send(port: int, spans: list[Any]) -> None:
    channel, stub = export_stub(port)
    try:
        stub.Export(request_of(spans), timeout=10)
    finally:
        channel.close()


def _stops(sink: Sink, run: TaggedRun) -> list[tuple[Any, ...]]:
    """(policy version, count) of each stop finding of the run."""
    return [(attr(s, "loopguard.policy.version"), attr(s, "loopguard.finding.count"))
            for s in sink.findings()
            if attr(s, "loopguard.run.id") == run.run_id and attr(s, "loopguard.finding.severity") == "stop"]


def _receiver(sink: Sink, policy: Path, **overrides: Any) -> ReceiverThread:
    return ReceiverThread(make_config(sink.port, policy=str(policy), **overrides).validate())


def _version(receiver: ReceiverThread) -> str:
    return receiver.sync(lambda: receiver.running.reloader.policy.version)  # type: ignore[union-attr]


def test_a_changed_file_judges_new_runs_while_open_runs_keep_their_policy(tmp_path: Path, sink: Sink,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(V1, encoding="utf-8")
    receiver = _receiver(sink, policy, reload_poll_seconds=0.05)
    open_run, new_run = TaggedRun(seed=1), TaggedRun(seed=2)
    try:
        _send(receiver.port, [open_run.call(1), open_run.call(2)])  # opened under v1
        wait_for(lambda: receiver.sync(lambda: open_run.run_id in receiver.running.assembler.runs), what="run open")
        with caplog.at_level(logging.INFO, logger="otel_loopguard.receiver"):
            policy.write_text(V2, encoding="utf-8")
            wait_for(lambda: _version(receiver) == "v2", what="the changed policy file picked up")
        assert "policy v2 replaces v1" in caplog.text
        _send(receiver.port, [open_run.call(s) for s in range(3, 7)] + [open_run.root()])
        _send(receiver.port, [new_run.call(s) for s in range(1, 7)] + [new_run.root()])
        wait_for(lambda: _stops(sink, open_run) and _stops(sink, new_run), what="both runs judged")
    finally:
        receiver.stop()
    assert _stops(sink, open_run)[0] == ("v1", 5)  # judged to the end by the policy it started with
    assert _stops(sink, new_run)[0] == ("v2", 3)  # v2 stops at the 3rd identical call


def test_a_bad_policy_file_keeps_judging_with_the_old_policy(tmp_path: Path, sink: Sink,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(V1, encoding="utf-8")
    receiver = _receiver(sink, policy, reload_poll_seconds=0)
    try:
        bad = {
            "version: v2\nrepeat: {stop_at: 0}\n": "repeat.stop_at: expected an integer >= 1",
            "version: v2\nrepeat: {warn_at: 3, stop_at: 5\n": "not valid YAML",
            "version: v1\nrepeat: {warn_at: 2, stop_at: 3}\n": "its version (v1) did not",  # rules changed, version not
        }
        with caplog.at_level(logging.ERROR, logger="otel_loopguard.receiver"):
            for text, why in bad.items():
                policy.write_text(text, encoding="utf-8")
                receiver.sync(receiver.running.reload)  # what SIGHUP calls
                assert why in caplog.records[-1].getMessage()
                assert "keeping the running policy" in caplog.records[-1].getMessage()
        assert receiver.running.metrics.get("reload_failures_total", setting="policy") == 3
        assert _version(receiver) == "v1"
        run = TaggedRun(seed=3)
        _send(receiver.port, [run.call(s) for s in range(1, 7)] + [run.root()])
        wait_for(lambda: _stops(sink, run), what="the run judged")
        assert _stops(sink, run)[0] == ("v1", 5)
    finally:
        receiver.stop()


def test_sighup_reloads_the_policy_of_a_running_serve(tmp_path: Path, sink: Sink) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(V1, encoding="utf-8")
    port = _free_port()
    proc = _serve("--listen", f"127.0.0.1:{port}", "--forward", f"127.0.0.1:{sink.port}", "--policy", str(policy),
                  "--reload-poll-seconds", "0", "--root-grace-seconds", "0.2")
    try:
        _wait_serving(port, proc)
        policy.write_text(V2, encoding="utf-8")
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)  # handled on the event loop at once; the margin is for a loaded machine
        run = TaggedRun(seed=4)
        _send(port, [run.call(s) for s in range(1, 7)] + [run.root()])
        wait_for(lambda: _stops(sink, run), what="the run judged")
        assert _stops(sink, run)[0] == ("v2", 3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0 and "policy v2 replaces v1" in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_serve_with_a_missing_certificate_exits_2_naming_the_setting(tmp_path: Path) -> None:
    missing = str(tmp_path / "server.pem")
    proc = _serve("--listen", f"127.0.0.1:{_free_port()}", "--forward", "127.0.0.1:4317",
                  "--tls-cert-file", missing, "--tls-key-file", missing)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [f"otel-loopguard serve: tls_cert_file: cannot read {missing}: "
                                        "No such file or directory"]
