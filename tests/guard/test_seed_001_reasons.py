"""Under the `seed-001` preset (repeat in window mode, results not compared) the reason says
what happened (issue 28, defect 6): the same call made N times within the window, whatever it
returned, not "in a row ... after calls that made no progress" for calls that alternated with
another tool and returned new content."""

from __future__ import annotations

from typing import Any

from otel_loopguard.canon import load_key
from otel_loopguard.enforce import Guard
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import load_policy

KEY = "seed-001-reasons-key-0123456789ab"


def _alternating() -> list[tuple[str, str]]:
    """lookup_order A12 and a new search, turn after turn; each lookup returns new content."""
    guard = Guard(Fingerprinter(load_key(key=KEY), load_policy("seed-001")))
    out = []
    for turn in range(1, 11):
        tool, args, result = (("lookup_order", {"order_id": "A12"}, {"status": f"step {turn}"}) if turn % 2
                              else ("search_cases", {"query": f"q{turn}"}, {"cases": [turn]}))
        decision = guard.check(tool, args, run_id="r", turn=turn)
        out.append((decision.action, decision.reason))
        if not decision.denied:
            guard.record(decision, result, True, run_id="r")
    return out


def test_the_window_repeat_reason_says_within_the_window_whatever_it_returned() -> None:
    decisions = _alternating()
    warn = decisions[4]  # the 3rd lookup
    deny = decisions[8]  # the 5th lookup
    assert warn == ("warn", "lookup_order would be called 3 times within 20 decisions with the same arguments, "
                            "whatever they returned (warn at 3, stop at 5)")
    assert deny == ("deny", "lookup_order would be called 5 times within 20 decisions with the same arguments, "
                            "whatever they returned (warn at 3, stop at 5)")
    for _, reason in decisions:
        assert "in a row" not in reason and "no progress" not in reason


def test_the_default_policy_still_says_in_a_row_after_calls_that_made_no_progress() -> None:
    """Negative control: consecutive mode, results compared: that is what happened there."""
    guard = Guard(Fingerprinter(load_key(key=KEY), load_policy(None)))
    reasons: list[Any] = []
    for turn in range(1, 6):
        decision = guard.check("lookup_order", {"order_id": "A12"}, run_id="r", turn=turn)
        reasons.append(decision.reason)
        if not decision.denied:
            guard.record(decision, {"status": "same"}, True, run_id="r")
    assert reasons[4] == ("lookup_order would be called 5 times in a row with the same arguments after calls "
                          "that made no progress (warn at 3, stop at 5)")
