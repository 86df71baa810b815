"""One policy per process, changed atomically (issue 28, defect 2; docs/policy.md "Reloading").

The guard's source and the processor's read the same file: whichever looks first, both judge
new runs by the same rules from then on, and a file refused (its rules changed under a version
in use, or under one this process already used) changes nothing anywhere."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

import pytest

import otel_loopguard
from otel_loopguard.canon import load_key
from otel_loopguard.errors import PolicyError
from otel_loopguard.policy_source import PolicySource

KEY = load_key(key=b"one-policy-key-7Rb2Lx9Qw4")
V1 = 'version: "v1"\nrepeat: {warn_at: 3, stop_at: 5}\n'
V2 = 'version: "v2"\nrepeat: {warn_at: 2, stop_at: 4}\n'
V2_CHANGED = 'version: "v2"\nrepeat: {warn_at: 2, stop_at: 3}\n'
V1_CHANGED = 'version: "v1"\nrepeat: {warn_at: 2, stop_at: 6}\n'
V3 = 'version: "v3"\nrepeat: {warn_at: 3, stop_at: 7}\n'


@pytest.fixture(autouse=True)
def _no_refused_file_left(tmp_path: Path) -> Iterator[None]:
    """The sources of a test outlive it (reload_policy() reloads every live one): a file left
    in a refused state would make every later reload_policy() of the session fail. A file
    that is not there is no change."""
    yield
    (tmp_path / "policy.yaml").unlink(missing_ok=True)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _pair(tmp_path: Path) -> tuple[Path, Clock, PolicySource, PolicySource]:
    """A guard's source (reload timer 1 s) and a processor's (no timer) on one file."""
    path = tmp_path / "policy.yaml"
    path.write_text(V1, encoding="utf-8")
    clock = Clock()
    guard = PolicySource(KEY, str(path), 1.0, clock)
    processor = PolicySource(KEY, str(path), 0)
    return path, clock, guard, processor


def _stop_at(source: PolicySource) -> int:
    return source.for_new_run().policy.repeat.stop_at


def test_the_timer_of_one_source_changes_the_policy_for_all(tmp_path: Path) -> None:
    path, clock, guard, processor = _pair(tmp_path)
    path.write_text(V2, encoding="utf-8")
    clock.now += 5
    assert guard.for_new_run().policy.version == "v2"  # the guard's timer took it ...
    assert processor.for_new_run().policy.version == "v2"  # ... for the processor too, at once
    assert _stop_at(processor) == _stop_at(guard) == 4


def test_changed_rules_under_the_version_in_use_are_refused_everywhere(tmp_path: Path) -> None:
    """The issue's sequence: v2 taken by the guard's timer, then the file changes under v2."""
    path, clock, guard, processor = _pair(tmp_path)
    path.write_text(V2, encoding="utf-8")
    clock.now += 5
    guard.for_new_run()
    path.write_text(V2_CHANGED, encoding="utf-8")
    with pytest.raises(PolicyError, match=rf"kept everywhere.*{path}.*version \(v2\) did not"):
        otel_loopguard.reload_policy()
    assert (guard.for_new_run().policy.version, _stop_at(guard)) == ("v2", 4)
    assert (processor.for_new_run().policy.version, _stop_at(processor)) == ("v2", 4)


def test_a_version_used_before_for_other_rules_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path, clock, guard, processor = _pair(tmp_path)
    path.write_text(V2, encoding="utf-8")
    otel_loopguard.reload_policy()
    path.write_text(V1_CHANGED, encoding="utf-8")  # v1 again, with rules v1 never had
    with pytest.raises(PolicyError, match=rf"{path}: version v1 already named other rules"):
        otel_loopguard.reload_policy()
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        clock.now += 5
        assert guard.for_new_run().policy.version == "v2"  # the timer refuses it too, and says so
    assert any("version v1 already named other rules" in r.getMessage() for r in caplog.records)
    assert processor.for_new_run().policy.version == "v2"


def test_negative_control_a_new_version_and_a_version_back_to_its_own_rules_are_taken(tmp_path: Path) -> None:
    path, clock, guard, processor = _pair(tmp_path)
    for text, version, stop_at in ((V2, "v2", 4), (V1, "v1", 5), (V3, "v3", 7)):
        path.write_text(text, encoding="utf-8")
        assert version in otel_loopguard.reload_policy()
        assert (processor.for_new_run().policy.version, _stop_at(guard)) == (version, stop_at)


def test_without_a_version_the_content_names_the_rules(tmp_path: Path) -> None:
    path, clock, guard, processor = _pair(tmp_path)
    path.write_text("repeat: {warn_at: 2, stop_at: 4}\n", encoding="utf-8")
    otel_loopguard.reload_policy()
    first = processor.for_new_run().policy.version
    path.write_text("repeat: {warn_at: 2, stop_at: 3}\n", encoding="utf-8")
    otel_loopguard.reload_policy()
    second = guard.for_new_run().policy.version
    assert first != second and second == processor.for_new_run().policy.version


def test_a_source_made_while_the_file_is_refused_judges_by_the_policy_in_use(tmp_path: Path) -> None:
    path, clock, guard, processor = _pair(tmp_path)
    path.write_text(V1_CHANGED, encoding="utf-8")  # v1 with other rules: refused
    late = PolicySource(KEY, str(path), 0)  # a guard or an install() made now
    assert _stop_at(late) == 5 and _stop_at(guard) == 5
