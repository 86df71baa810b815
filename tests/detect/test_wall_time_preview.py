"""The wall-time budget's preview (issue 28, defect 1): judged on the calls observed, from the
first one's start to the latest end, as observe() judges it: the call whose end reaches the
limit is the last allowed; from warn_ratio on each later call is told where the run stands."""

from __future__ import annotations

from otel_loopguard.detect.run import STOPPED_EARLIER

from .helpers import NO_BUDGETS, SEC, T0, Harness


def _preview(h: Harness, n: int) -> list:
    call = h.fingerprint("lookup", {"i": n}, None, turn=n, finished=False, start_ns=T0 + n * SEC)
    return [(level, reason) for level, kind, reason in h.run.preview(call)
            if kind == "budget" and not reason.startswith(STOPPED_EARLIER)]  # the detector's own verdict


def test_the_preview_warns_past_warn_ratio_and_stops_past_the_limit() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_seconds": 2, "warn_ratio": 0.8}})
    seen = []
    for n in range(1, 11):
        seen.append(_preview(h, n))
        start = T0 + (n - 1) * SEC // 4  # each call takes 0.25 s, back to back
        h.call("lookup", {"i": n}, {"row": n}, turn=n, start_ns=start, end_ns=start + SEC // 4)
    assert seen[:7] == [[]] * 7  # call 7 ends at 1.75 s: the preview of call 7 cannot know it
    assert seen[7] == [("warn", "the run has used 1.75 of the 2 seconds it may take")]
    assert seen[8] == [("stop", "the run already used its budget of 2 seconds")]  # call 8 ended at 2.0 s
    warns = [f for f in h.findings if f.kind == "budget" and f.severity == "warn"]
    assert [f.last_seq for f in warns] == [7]  # observe() marks the call whose end crossed the level


def test_no_times_no_wall_time_verdict() -> None:
    """Negative control: calls without times (a shell that has none) are never judged on time."""
    h = Harness({"budget": {**NO_BUDGETS, "max_seconds": 1}})
    for n in range(1, 6):
        h.call("lookup", {"i": n}, {"row": n}, turn=n)
    call = h.fingerprint("lookup", {"i": 9}, None, turn=9, finished=False)
    assert [v for v in h.run.preview(call) if v[1] == "budget"] == []
