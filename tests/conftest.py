"""The fast tier (`bash scripts/test.sh --fast`): every test that starts no real process, server
or browser. Tests that do carry the `real` marker: whole folders below, listed modules, or the
marker written on the test. In the fast tier (LOOPGUARD_FAST=1, `-m "not real"`) a test that
starts a process or listens on a socket without the marker fails and says so, so the tier
stays fast without anyone keeping a list of slow tests by hand.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any, Iterator

import grpc
import grpc.aio
import pytest
from tiers import FAST  # tests/ is on the path (pytest's rootdir conftest)

TESTS = Path(__file__).resolve().parent
# Folders whose every test runs real processes (the Collector, Jaeger, Phoenix, framework agents,
# restarts and overload of `serve`).
REAL_FOLDERS = frozenset({"collector", "e2e", "frameworks", "reliability", "mcp"})
# Modules that start `serve`, the CLI, a browser, mypy, pip or a gRPC server in most tests.
REAL_MODULES = frozenset({
    "test_setup_scripts.py", "test_ci_docs.py", "test_smoke.py", "test_types.py",
    "audit/test_audit_cli.py", "audit/test_audit_fixtures.py", "calibrate/test_calibrate_cli.py",
    "calibrate/test_html_browser.py", "native/test_ci_rule.py",
    # the receiver's own tests run it as a real gRPC server
    "detect/test_imports.py", "processor/test_e2e_receiver.py", "receiver/test_backpressure.py",
    "receiver/test_cli.py", "receiver/test_conversations.py", "receiver/test_dedupe.py",
    "receiver/test_downstream_auth.py", "receiver/test_e2e.py", "receiver/test_forward_queue.py",
    "receiver/test_guard_events.py", "receiver/test_handoffs.py", "receiver/test_large_requests.py",
    "receiver/test_listen_security.py", "receiver/test_malformed.py", "receiver/test_modes.py",
    "receiver/test_outage.py", "receiver/test_partial_success.py", "receiver/test_phoenix_annotations.py",
    "receiver/test_placement.py", "receiver/test_reload.py", "receiver/test_review_fixes.py",
    "receiver/test_robustness.py", "receiver/test_settings.py", "receiver/test_streaming.py",
    "receiver/test_telemetry.py", "receiver/test_concurrent_copies.py", "receiver/test_late_calls.py",
})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real: starts a real process, server or browser (left out of the fast tier)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(TESTS)
        if rel.parts[0] in REAL_FOLDERS or rel.as_posix() in REAL_MODULES:
            item.add_marker(pytest.mark.real)


def _refuse(what: str) -> Any:
    def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"this test {what} but is not marked real: add @pytest.mark.real (or list its module "
                           "in tests/conftest.py REAL_MODULES) so the fast tier stays fast")
    return refused


@pytest.fixture(autouse=True)
def _fast_tier_starts_nothing_real(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if FAST and request.node.get_closest_marker("real") is None:
        monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("starts a process"))
        monkeypatch.setattr(socket.socket, "listen", _refuse("listens on a socket"))
        monkeypatch.setattr(grpc, "server", _refuse("starts a gRPC server"))
        monkeypatch.setattr(grpc.aio, "server", _refuse("starts a gRPC server"))
    yield
