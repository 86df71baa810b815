"""The words a person reads (findings/wording.py): a stop's next step, the release rule in words."""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.findings import Finding
from otel_loopguard.findings.wording import next_step, plain_rule, with_next_step


def f(kind: str = "repeat", severity: str = "stop", **over: Any) -> Finding:
    fields: dict[str, Any] = dict(kind=kind, severity=severity, first_seq=1, last_seq=5, count=5, seqs=(1, 2, 3, 4, 5),
                                  span_ids=(None,) * 5, reason="lookup_order was called 5 times.", tool="lookup_order")
    fields.update(over)
    return Finding(**fields)


@pytest.mark.parametrize("kind, step", [
    ("repeat", "enforce mode would deny call 5: see docs/guard.md"),  # the call that crosses the threshold
    ("cycle", "enforce mode would deny call 5: see docs/guard.md"),
    ("no_progress", "enforce mode would deny the call after call 5: see docs/guard.md"),  # only its outcome tells
    ("budget", "enforce mode would deny the call after call 5: see docs/guard.md"),
    ("tool_cap", "enforce mode would deny lookup_order's calls after call 5: see docs/guard.md"),  # that tool only
])
def test_a_stop_ends_with_what_enforce_mode_would_deny(kind: str, step: str) -> None:
    assert next_step(f(kind)) == step
    assert with_next_step(f(kind)).reason == f"lookup_order was called 5 times; {step}"


def test_negative_warns_integrity_findings_and_callless_stops_get_no_next_step() -> None:
    for quiet in (f(severity="warn"), f(severity="info"), f("incomplete_trace"), f(first_seq=0, last_seq=0, seqs=())):
        assert next_step(quiet) is None and with_next_step(quiet) == quiet


def test_the_next_step_is_added_once() -> None:
    once = with_next_step(f())
    assert with_next_step(once) == once


def test_broken_rules_read_in_words_with_their_name_after() -> None:
    assert plain_rule("uncontained_loop: stop-level findings (no_progress, repeat) with no guard denying the next call") == (
        "the agent kept going after a stop finding (no_progress, repeat): enforce mode would have denied the next "
        "call (see docs/guard.md) [uncontained_loop]")
    late = "guard_too_late: the stop threshold was crossed at call 5, but the guard first acted at call 7"
    assert plain_rule(late) == ("the guard acted later than it should have: the stop threshold was crossed at call 5, "
                                "but the guard first acted at call 7 [guard_too_late]")
    assert plain_rule("a_rule_not_known_yet: as it was") == "a_rule_not_known_yet: as it was"  # never lost


def test_every_rule_the_release_rule_can_break_has_its_words() -> None:
    import re
    from pathlib import Path

    from otel_loopguard.findings.wording import PLAIN_RULES
    from otel_loopguard.score import release

    names = set(re.findall(r'out\.append\(\s*f?"(\w+):', Path(release.__file__).read_text(encoding="utf-8")))
    assert len(names) >= 9 and names == set(PLAIN_RULES)
