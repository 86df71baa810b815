"""A new policy without a restart, in-process: guards and the processor (policy_source.py).

Each test changes the policy file under a guard or an installed processor and checks the
runs on either side of the change: runs opened after it are judged by the new rules and
name its version; a run already open keeps its rules; a bad file changes nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import otel_loopguard
from otel_loopguard.enforce import ToolGuard
from otel_loopguard.errors import PolicyError
from otel_loopguard.canon import load_key
from otel_loopguard.policy_source import PolicySource

KEY = b"policy-reload-key-4Kd8Qw2Zx7"
LENIENT = 'version: "lenient-1"\nrepeat: {warn_at: 3, stop_at: 5}\n'
STRICT = 'version: "strict-2"\nrepeat: {warn_at: 2, stop_at: 3}\n'


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _setup(tmp_path: Path, text: str = LENIENT, interval: float = 1.0) -> tuple[Path, Clock, ToolGuard, list[str]]:
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    clock = Clock()
    guard = ToolGuard(PolicySource(load_key(key=KEY), str(path), interval, clock))
    invoked: list[str] = []
    return path, clock, guard, invoked


def _calls_until_denied(guard: ToolGuard, run: str, invoked: list[str], n: int = 6) -> int:
    """How many identical calls ran in run `run` before the guard denied one."""
    @guard.tool
    def lookup_order(order_id: str) -> dict:
        invoked.append(run)
        return {"status": "delivered"}

    with guard.run(run):
        for _ in range(n):
            lookup_order("A-1")
    return invoked.count(run)


def _rewrite(path: Path, text: str, clock: Clock) -> None:
    path.write_text(text, encoding="utf-8")
    clock.now += 5  # past the interval: the next run to open looks at the file


def test_runs_opened_after_the_change_follow_it_and_an_open_run_keeps_its_rules(tmp_path: Path) -> None:
    path, clock, guard, invoked = _setup(tmp_path)
    assert _calls_until_denied(guard, "open", invoked, n=2) == 2  # opened under stop_at 5
    _rewrite(path, STRICT, clock)
    assert _calls_until_denied(guard, "after", invoked) == 2  # a new run: stop_at 3, two ran
    assert guard.policy.version == "strict-2"
    # The open run goes on under stop_at 5: calls 3 and 4 run (strict would deny the 3rd).
    assert _calls_until_denied(guard, "open", invoked, n=4) == 4


def test_findings_name_the_policy_that_judged_their_run(tmp_path: Path) -> None:
    path, clock, guard, _ = _setup(tmp_path)
    first = guard.check("lookup_order", {"order_id": "A-1"}, run_id="old")
    _rewrite(path, STRICT, clock)
    second = guard.check("lookup_order", {"order_id": "A-1"}, run_id="new")
    versions = {}
    for run, decision in (("old", first), ("new", second)):
        findings: list[Any] = []
        for _ in range(5):
            guard.record(decision, {"status": "delivered"}, True, run_id=run)
            findings += guard.findings(run)  # the call's findings, settled off the app thread
            decision = guard.check("lookup_order", {"order_id": "A-1"}, run_id=run)
        versions[run] = {f.policy_version for f in findings}
    assert versions == {"old": {"lenient-1"}, "new": {"strict-2"}}


def test_the_file_is_looked_at_only_when_the_interval_has_passed(tmp_path: Path) -> None:
    path, clock, guard, invoked = _setup(tmp_path)
    path.write_text(STRICT, encoding="utf-8")
    clock.now += 0.5  # within the interval: not looked at yet
    assert _calls_until_denied(guard, "early", invoked) == 4
    clock.now += 1
    assert _calls_until_denied(guard, "late", invoked) == 2


def test_interval_zero_never_looks_but_reload_policy_takes_the_file(tmp_path: Path) -> None:
    path, clock, guard, invoked = _setup(tmp_path, interval=0)
    _rewrite(path, STRICT, clock)
    assert _calls_until_denied(guard, "unwatched", invoked) == 4
    assert "strict-2" in otel_loopguard.reload_policy()
    assert _calls_until_denied(guard, "reloaded", invoked) == 2


@pytest.mark.parametrize("bad, reason", [
    ("repeat: {warn_at: 3, stop_at: [5\n", "not valid YAML"),
    ('version: "broken-3"\nrepeat: {warn_at: 6, stop_at: 2}\n', "repeat"),
    ('version: "lenient-1"\nrepeat: {warn_at: 2, stop_at: 3}\n', "version (lenient-1) did not"),
])
def test_a_bad_file_keeps_the_policy_in_use_and_says_why(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                          bad: str, reason: str) -> None:
    path, clock, guard, invoked = _setup(tmp_path)
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        _rewrite(path, bad, clock)
        assert _calls_until_denied(guard, "kept", invoked) == 4
    assert guard.policy.version == "lenient-1"
    assert any(reason in r.getMessage() and "keeping policy lenient-1" in r.getMessage() for r in caplog.records)
    with pytest.raises(PolicyError, match="the policy in use is kept"):
        otel_loopguard.reload_policy()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert KEY.decode() not in logged and KEY.hex() not in logged
    # Mended: the next change is taken.
    _rewrite(path, STRICT, clock)
    assert _calls_until_denied(guard, "mended", invoked) == 2


def test_a_bad_file_is_reported_once_per_change(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path, clock, guard, invoked = _setup(tmp_path)
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        _rewrite(path, "repeat: [\n", clock)
        for n in range(3):
            clock.now += 5
            _calls_until_denied(guard, f"r{n}", invoked, n=1)
    assert sum("keeping policy" in r.getMessage() for r in caplog.records) == 1


def test_a_file_removed_mid_swap_is_not_a_change(tmp_path: Path) -> None:
    path, clock, guard, invoked = _setup(tmp_path)
    path.unlink()
    clock.now += 5
    assert _calls_until_denied(guard, "gone", invoked) == 4
    assert guard.policy.version == "lenient-1"


def test_a_policy_given_in_code_is_never_reloaded(tmp_path: Path) -> None:
    from otel_loopguard.fingerprint import Fingerprinter
    from otel_loopguard.policy import policy_from_mapping

    fixed = Fingerprinter(load_key(key=KEY), policy_from_mapping({"version": "code-1", "repeat": {"warn_at": 2, "stop_at": 3}}))
    guard = ToolGuard(fixed)
    otel_loopguard.reload_policy()  # the built-in policy must not replace it
    assert guard.policy.version == "code-1"
