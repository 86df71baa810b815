"""What a preview promises, pinned where a small change would go unnoticed (issue 28, item 7):

- a call not yet run is judged as bringing nothing new: every preview sees a judgement with
  no progress, no novel result, no new items, no terminal state (detect/run.py);
- `Run.denied()` stops the run only when it may still be stopped *and* the reason is not the
  run's earlier stop (a stopped run keeps its first stop; "stopped earlier" never becomes one);
- the per-tool cap nudges from warn_ratio of the cap, rounded up: calls 4 and 5 of 5, not 3
  (detect/budgets.py).
"""

from __future__ import annotations

from typing import Any, Optional

from otel_loopguard.detect.run import STOPPED_EARLIER
from otel_loopguard.progress import Judgement

from .helpers import NO_BUDGETS, Harness


class _Spy:
    """A preview that only notes the step it was shown."""

    kind = "spy"

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def preview(self, step: Any) -> Optional[tuple[str, str]]:
        self.seen.append(step)
        return None


def test_a_call_not_yet_run_is_previewed_as_bringing_nothing_new() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.call("search", {"q": "a"}, {"rows": [1]}, turn=1)
    spy = _Spy()
    h.run._previews.append(spy)
    h.run.preview(h.fingerprint("search", {"q": "b"}, None, turn=2, finished=False))

    (step,) = spy.seen
    assert step.judgement == Judgement(progressed=False, novel_result=False, new_items=0, terminal=False)
    assert step.judgement.new_information is False
    assert step.decision == 2  # a new turn: the next decision


def test_a_sibling_is_previewed_in_its_own_decision() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.call("search", {"q": "a"}, {"rows": [1]}, turn=1)
    spy = _Spy()
    h.run._previews.append(spy)
    h.run.preview(h.fingerprint("search", {"q": "b"}, None, turn=1, finished=False))
    assert spy.seen[0].decision == 1


def _stopped_by_repeat() -> Harness:
    h = Harness({"budget": NO_BUDGETS})
    for turn in range(1, 6):
        h.call("lookup", {"id": 1}, {"status": "same"}, turn=turn)
    assert h.run.stopped is not None and h.run.stopped.kind == "repeat"
    return h


def test_denied_keeps_the_first_stop_of_a_stopped_run() -> None:
    h = _stopped_by_repeat()
    first = h.run.stopped
    h.run.denied(h.fingerprint("search", {"q": "x"}, None, turn=6, finished=False), "cycle", "a fresh reason")
    assert h.run.stopped is first


def test_denied_on_the_runs_earlier_stop_never_becomes_a_stop() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.call("lookup", {"id": 1}, {"status": "a"}, turn=1)
    h.run.denied(h.fingerprint("lookup", {"id": 2}, None, turn=2, finished=False), "repeat",
                 f"{STOPPED_EARLIER}lookup was called 5 times")
    assert h.run.stopped is None


def test_denied_with_a_fresh_reason_stops_a_running_run() -> None:
    """Negative control: the one case that stops the run."""
    h = Harness({"budget": NO_BUDGETS})
    h.call("lookup", {"id": 1}, {"status": "a"}, turn=1)
    call = h.fingerprint("lookup", {"id": 1}, None, turn=2, finished=False)
    h.run.denied(call, "repeat", "lookup would be called 5 times")
    assert h.run.stopped is not None
    assert (h.run.stopped.kind, h.run.stopped.reason, h.run.stopped.last_seq) == ("repeat", "lookup would be called 5 times", 2)


def test_the_cap_nudges_from_warn_ratio_of_the_cap_then_stops() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "warn_ratio": 0.8}, "tools": {"lookup": {"max_calls": 5}}})
    levels = []
    for n in range(1, 7):
        call = h.fingerprint("lookup", {"id": n}, None, turn=n, finished=False)
        verdicts = [(level, reason) for level, kind, reason in h.run.preview(call) if kind == "tool_cap"]
        levels.append(verdicts[0] if verdicts else None)
        h.call("lookup", {"id": n}, {"row": n}, turn=n)
    assert levels == [
        None, None, None,
        ("warn", "this is call 4 of the 5 lookup may make per run"),
        ("warn", "this is call 5 of the 5 lookup may make per run"),
        ("stop", "lookup already made its 5 calls allowed per run"),
    ]


def test_a_cap_of_ten_nudges_from_its_eighth_call() -> None:
    """The level rounds up: 10 x 0.75 = 7.5, so call 8 is the first told."""
    h = Harness({"budget": {**NO_BUDGETS, "warn_ratio": 0.75}, "tools": {"lookup": {"max_calls": 10}}})
    first = None
    for n in range(1, 11):
        call = h.fingerprint("lookup", {"id": n}, None, turn=n, finished=False)
        if first is None and any(kind == "tool_cap" and level == "warn" for level, kind, _ in h.run.preview(call)):
            first = n
        h.call("lookup", {"id": n}, {"row": n}, turn=n)
    assert first == 8
