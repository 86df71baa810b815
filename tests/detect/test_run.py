"""The run: stamping, ordering, independence, finding invariants, and bounded state at scale."""

from __future__ import annotations

from collections import deque
from typing import Any, Iterator

import pytest

from otel_loopguard.bounded import BoundedMap, BoundedSet
from otel_loopguard.detect import OutOfOrderError, Run
from otel_loopguard.findings import KINDS, SEVERITY_RANK, worst
from otel_loopguard.policy import BUILTIN_VERSION, Policy, content_version
from otel_loopguard.detect import repeat
from otel_loopguard.progress import tracker

from .helpers import NO_BUDGETS, RUN_ID, Harness, feed

EVERYTHING = {
    "version": "pv-9",
    "budget": {**NO_BUDGETS, "max_tool_calls": 40},
    "tools": {
        "web_search": {"max_calls": 2},
        "get_export_status": {"poll": {"max_polls": 2}, "exempt_repeat": True},
        "issue_refund": {"idempotency_key": "key"},
    },
}


def everything(h: Harness) -> None:
    """A run that triggers every detector at least once."""
    h.feed([("lookup", {"id": 1}, "same")] * 4)  # repeat, no_progress
    h.feed([("read", {}, "r"), ("write", {}, "w")] * 2)  # cycle
    h.feed([("parse", {"n": i}, {"error": "bad"}, None, False) for i in range(2)])  # error_streak
    h.feed([("web_search", {"q": i}, {"hits": [i]}) for i in range(2)])  # tool_cap
    h.feed([("get_export_status", {"id": 1}, {"s": i}) for i in range(2)])  # poll_budget
    h.feed([("issue_refund", {"amount": 1, "key": k}, "ok") for k in ("a", "b")])  # duplicate_write
    h.feed([("fetch", {"u": 1}, "page", 99)] * 2)  # parallel_duplicate
    h.feed([("filler", {"i": i}, {"i": i}) for i in range(30)])  # budget
    h.model(100, 10, 10, "m")


def test_every_finding_is_stamped_with_run_id_and_policy_version() -> None:
    h = Harness(EVERYTHING, run_id="run-xyz")
    everything(h)
    expected = {"repeat", "cycle", "error_streak", "no_progress", "budget", "tool_cap",
                "poll_budget", "duplicate_write", "parallel_duplicate"}
    assert h.kinds() == expected
    assert {(f.run_id, f.policy_version) for f in h.findings} == {("run-xyz", "pv-9")}


def test_model_call_findings_are_stamped_too() -> None:
    h = Harness({"version": "pv-1", "budget": {**NO_BUDGETS, "max_turns": 1}}, run_id="r2")
    (f,) = h.model(1)
    assert (f.run_id, f.policy_version) == ("r2", "pv-1")


def test_unversioned_policy_is_stamped_with_its_content_hash() -> None:
    mapping = {"budget": NO_BUDGETS, "repeat": {"warn_at": 2}}
    (f,) = feed([("t", {}, "r")] * 2, mapping)
    assert f.policy_version == content_version(mapping)
    assert f.policy_version.startswith("sha256:") and len(f.policy_version) == len("sha256:") + 12


def test_builtin_policy_is_stamped_builtin() -> None:
    h = Harness(Policy())
    h.feed([("t", {}, "r")] * 3)
    assert [(f.kind, f.policy_version) for f in h.findings] == [("repeat", BUILTIN_VERSION)]


def test_every_finding_is_well_formed() -> None:
    h = Harness(EVERYTHING)
    everything(h)
    for f in h.findings:
        assert f.kind in KINDS and f.severity in SEVERITY_RANK and f.reason
        assert len(f.span_ids) == len(f.seqs) >= 1
        assert list(f.seqs) == sorted(set(f.seqs))
        assert (f.first_seq, f.last_seq) == (f.seqs[0], f.seqs[-1])
        assert f.count >= len(f.seqs)
        assert f.last_seq <= h.fired_at(f)


@pytest.mark.parametrize("second", [1, 5])
def test_a_call_that_is_not_after_the_previous_one_is_rejected(second: int) -> None:
    h = Harness({"budget": NO_BUDGETS}, run_id="run-7")
    h.call("t", {}, "r", seq=5)
    bad = h.fingerprint("t", {}, "r", seq=second)
    with pytest.raises(OutOfOrderError) as err:
        h.run.observe(bad)
    assert "run-7" in str(err.value) and f"call {second} arrived after call 5" in str(err.value)
    assert isinstance(err.value, ValueError)


def test_a_rejected_call_leaves_the_run_unchanged() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.call("t", {}, "r", seq=1)
    h.call("t", {}, "r", seq=2)
    with pytest.raises(OutOfOrderError):
        h.run.observe(h.fingerprint("t", {}, "r", seq=2))
    assert h.call("t", {}, "r", seq=3) != []  # the third identical call, not the fourth
    assert [f.kind for f in h.findings if f.kind == "repeat"] == ["repeat"]
    assert h.findings[0].count == 3


def test_gaps_in_the_sequence_are_accepted() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for seq in (3, 10, 11):
        h.call("t", {}, "r", seq=seq)
    assert [(f.kind, f.seqs) for f in h.findings if f.kind == "repeat"] == [("repeat", (3, 10, 11))]


@pytest.mark.parametrize("told_of_the_gap", [True, False])
def test_after_a_gap_patterns_of_calls_in_a_row_start_afresh(told_of_the_gap: bool) -> None:
    """Calls 1, 2, (3 missing), 4, 5, 6 of one action: the missing call may have been another
    action, so no repeat is claimed across it; three in a row after it still are one."""
    h = Harness({"budget": NO_BUDGETS})
    for seq in (1, 2):
        h.call("t", {}, "r", seq=seq)
    if told_of_the_gap:
        h.run.gap()
    h.call("t", {}, "r", seq=4)
    repeats = [f.seqs for f in h.findings if f.kind == "repeat"]
    if not told_of_the_gap:  # the mutation: without gap() the streak runs across it
        assert repeats == [(1, 2, 4)]
        return
    assert repeats == []
    h.call("t", {}, "r", seq=5)
    h.call("t", {}, "r", seq=6)
    assert [f.seqs for f in h.findings if f.kind == "repeat"] == [(4, 5, 6)]


def test_a_gap_breaks_error_streaks_cycles_and_no_progress_but_not_totals() -> None:
    h = Harness({"budget": NO_BUDGETS, "tools": {"t": {"max_calls": 4}}})
    h.call("t", {"n": 1}, "r", ok=False, seq=1)  # one error before the gap
    h.run.gap()
    h.call("t", {"n": 2}, "r", ok=False, seq=3)  # one after: a streak of one, not two
    assert [f for f in h.findings if f.kind == "error_streak"] == []
    h.call("t", {"n": 3}, "r", ok=False, seq=4)
    assert [f.seqs for f in h.findings if f.kind == "error_streak"] == [(3, 4)]
    h.call("t", {"n": 4}, "r", seq=5)  # the 4th call of t: its cap counts across the gap
    assert [(f.severity, f.last_seq) for f in h.findings if f.kind == "tool_cap"][-1] == ("stop", 5)


def test_runs_do_not_share_state() -> None:
    pol = {"budget": NO_BUDGETS}
    a, b = Harness(pol, "a"), Harness(pol, "b")
    for h in (a, b, a, b):
        h.call("t", {}, "r")
    assert a.findings == [] and b.findings == []
    b.call("t", {}, "r")
    assert [f.run_id for f in b.findings if f.kind == "repeat"] == ["b"]


# ---- scale: 10k calls, functional (not timed) --------------------------------------------------

N = 10_000
SCALE_POLICY = {
    "budget": NO_BUDGETS,
    "tools": {
        "search": {"progress": {"cursor_field": "cursor", "items_field": "items"}},
        "issue_refund": {"idempotency_key": "key"},
        "get_export_status": {
            "poll": {"max_polls": 20, "deadline_seconds": 600},
            "progress": {"state_field": "state", "terminal_states": ["complete"]},
        },
        "lookup_order": {"progress": {"version_field": "version"}},
    },
}
STATES = ("queued", "running", "complete")


def healthy(i: int) -> tuple:
    turn = i // 2 + 1  # two different siblings per decision
    kind = i % 5
    if kind == 0:
        return ("search", {"q": "refund", "cursor": f"c{i}"}, {"items": [{"id": i * 10 + k} for k in range(10)]}, turn)
    if kind == 1:
        return ("read_file", {"path": f"f{i}.txt"}, f"text {i}", turn)
    if kind == 2:
        return ("issue_refund", {"order": f"o{i}", "amount": 5, "key": f"k{i}"}, {"status": "accepted", "ref": i}, turn)
    if kind == 3:
        job = i // 15  # each export polled three times: queued, running, complete
        return ("get_export_status", {"export_id": job}, {"state": STATES[(i // 5) % 3], "job": job}, turn)
    return ("lookup_order", {"order_id": f"o{i}"}, {"status": "delivered", "version": 1, "order": i}, turn)


def _containers(obj: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every container reachable from the run's detector state (not policy, not calls)."""
    if depth > 6:
        return
    if isinstance(obj, (BoundedMap, BoundedSet)):
        yield type(obj).__name__, obj
        for value in getattr(obj, "_items").values():
            yield from _containers(value, depth + 1)
        return
    if isinstance(obj, (list, deque, set, frozenset)):
        yield type(obj).__name__, obj
        for value in obj:
            yield from _containers(value, depth + 1)
        return
    if isinstance(obj, dict):
        yield "dict", obj
        for value in obj.values():
            yield from _containers(value, depth + 1)
        return
    module = type(obj).__module__
    if not module.startswith(("otel_loopguard.detect", "otel_loopguard.progress")):
        return
    names = list(getattr(obj, "__dict__", {})) + list(getattr(type(obj), "__slots__", ()))
    for name in names:
        if name in ("policy", "_policy", "_rule"):
            continue
        yield from _containers(getattr(obj, name, None), depth + 1)


def _assert_bounded(run: Run, plain_limit: int = 32) -> dict[str, int]:
    sizes: dict[str, int] = {}
    seen = 0
    for name, container in _containers(run):
        seen += 1
        limit = getattr(container, "_limit", None) if name in ("BoundedMap", "BoundedSet") else plain_limit
        assert len(container) <= limit, f"{name} holds {len(container)} > {limit}"
        sizes[f"{name}:{limit}"] = max(sizes.get(f"{name}:{limit}", 0), len(container))
    assert seen >= 20  # the walk reached into every detector
    return sizes


def test_ten_thousand_healthy_calls_produce_no_findings_and_bounded_state() -> None:
    h = Harness(SCALE_POLICY)
    for i in range(N):
        h.call(*healthy(i))
    assert h.findings == []
    assert h.run.decision == N // 2
    _assert_bounded(h.run)
    # The churn really did fill the bounded memories to their limits.
    # Full, give or take the eighth a bounded container drops at once when it overflows.
    assert tracker.MAX_SEEN_RESULTS * 7 // 8 <= len(h.run.progress._results) <= tracker.MAX_SEEN_RESULTS
    assert tracker.MAX_SEEN_ITEMS * 7 // 8 <= len(h.run.progress._items) <= tracker.MAX_SEEN_ITEMS


def test_window_mode_keeps_a_bounded_number_of_windows() -> None:
    h = Harness({**SCALE_POLICY, "repeat": {"mode": "window", "window": 20}})
    for i in range(3000):
        h.call(*healthy(i))
    assert h.findings == []
    _assert_bounded(h.run)
    (detector,) = [d for d in h.run._detectors if isinstance(d, repeat.RepeatDetector)]
    assert repeat.MAX_WINDOW_ACTIONS * 7 // 8 <= len(detector._windows) <= repeat.MAX_WINDOW_ACTIONS


def test_a_long_loop_reports_once_per_level_with_bounded_evidence() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for _ in range(3000):
        h.call("lookup_order", {"order_id": "A12"}, {"status": "delivered"})
    assert sorted((f.kind, f.severity, f.count) for f in h.findings) == [
        ("no_progress", "stop", 6),
        ("no_progress", "warn", 3),
        ("repeat", "stop", 5),
        ("repeat", "warn", 3),
    ]
    _assert_bounded(h.run, plain_limit=16)


def test_a_long_error_streak_keeps_bounded_evidence() -> None:
    h = Harness({"budget": NO_BUDGETS})
    for i in range(3000):
        h.call("parse", {"n": i}, {"error": f"bad {i}"}, turn=i // 4, ok=False)
    assert [(f.kind, f.severity) for f in h.findings if f.kind == "error_streak"] == [
        ("error_streak", "warn"),
        ("error_streak", "stop"),
    ]
    _assert_bounded(h.run, plain_limit=16)


def test_rule_specific_detectors_still_judge_their_tools_among_ordinary_calls() -> None:
    """Each call visits only the detectors its rule can need; interleaving tools with
    different rules must not cost a poll budget, a duplicate write or a cap its evidence."""
    from .helpers import NO_BUDGETS, Harness

    pol = {
        "budget": NO_BUDGETS,
        "tools": {
            "issue_refund": {"side_effect": True},
            "search": {"max_calls": 2},
        },
    }
    h = Harness(pol)
    for n in range(3):
        h.call("lookup", {"n": n}, {"r": n}, turn=2 * n + 1)
        h.call("issue_refund", {"order": "A"}, {"ok": True}, turn=2 * n + 2)
        h.call("search", {"q": n}, {"hits": n}, turn=2 * n + 2)
    assert {f.tool for f in h.kind("duplicate_write")} == {"issue_refund"}
    assert {f.tool for f in h.kind("tool_cap")} == {"search"}
    # Negative control: the ordinary tool, with the same pattern, is neither a write nor capped.
    assert all(f.tool != "lookup" for f in h.kind("duplicate_write") + h.kind("tool_cap"))


# ---- the summary the score reads ---------------------------------------------------------------


def test_summary_one_result_is_not_new_items_and_a_second_distinct_one_is() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.feed([("lookup", {"id": 1}, "same")] * 3)
    s = h.run.summary
    assert (s.tool_calls, s.distinct_actions, s.new_items_observed, s.progress_observed) == (3, 1, False, False)
    assert s.first_result == h.calls[0].result
    h.call("lookup", {"id": 1}, "changed")  # a repeated action with a new result
    assert (s.tool_calls, s.distinct_actions, s.new_items_observed, s.progress_observed) == (4, 1, True, True)
    assert s.first_result == h.calls[0].result  # the first result stays the first


def test_summary_progress_counts_only_for_a_repeated_action() -> None:
    """A first call of an action is always new: only a repeated action's progress says the
    agent learned something by asking again."""
    h = Harness({"budget": NO_BUDGETS})
    h.feed([("read", {"i": i}, {"row": i}) for i in range(3)])
    s = h.run.summary
    assert (s.distinct_actions, s.progress_observed, s.new_items_observed) == (3, False, True)


def test_summary_declared_new_items_count_from_the_first_call() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"list": {"progress": {"items_field": "ids"}}}}
    h = Harness(pol)
    h.call("list", {"page": 1}, {"ids": ["a"]})
    assert h.judgements[0].new_items == 1 and h.run.summary.new_items_observed is True


# ---- preview: what the run says before a call runs ------------------------------------------


def test_after_a_stop_every_later_call_is_previewed_as_stopped() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.feed([("lookup", {"id": 1}, "same")] * 5)  # the repeat stop
    stop = h.kind("repeat")[-1]
    other = h.fingerprint("other", {"q": 1}, None)
    assert h.run.preview(other) == [("stop", "repeat", f"the run was stopped earlier: {stop.reason}")]


def test_after_the_turn_limit_its_own_turn_still_runs_and_the_next_is_stopped() -> None:
    h = Harness({"budget": {**NO_BUDGETS, "max_turns": 2}})
    h.call("read", {"t": 1}, {"r": 1}, turn=1)
    h.call("read", {"t": 2}, {"r": 2}, turn=2)  # the turn limit: the last turn allowed
    sibling = h.fingerprint("read", {"t": 2, "k": 2}, None, turn=2)
    assert h.run.preview(sibling) == []
    later = [kind for _, kind, reason in h.run.preview(h.fingerprint("read", {"t": 3}, None, turn=3))
             if reason.startswith("the run was stopped earlier: ")]
    assert later == ["budget"]


def test_a_gap_keeps_previews_working_and_forgets_the_streak_before_it() -> None:
    h = Harness({"budget": NO_BUDGETS})
    lookup = ("lookup", {"id": 1}, "same")
    h.feed([lookup] * 2)
    call = h.fingerprint(*lookup)
    assert [lvl for lvl, kind, _ in h.run.preview(call) if kind == "repeat"] == ["warn"]  # the third
    h.run.gap()
    assert h.run.preview(call) == []  # the streak before the gap is not evidence
    h.feed([lookup] * 2)
    assert [lvl for lvl, kind, _ in h.run.preview(h.fingerprint(*lookup, seq=h.seq + 1))
            if kind == "repeat"] == ["warn"]


def test_preview_applies_the_tools_own_rule() -> None:
    """The preview judges a call under its tool's rule (here a per-run cap), as observe does."""
    h = Harness({"budget": NO_BUDGETS, "tools": {"web_search": {"max_calls": 1}}})
    h.call("web_search", {"q": 1}, {"hits": [1]})
    def own(tool: str) -> list:  # the detectors' previews, without the run's "stopped earlier"
        return [p for p in h.run.preview(h.fingerprint(tool, {"q": 2}, None)) if "stopped earlier" not in p[2]]

    assert own("web_search") == [("stop", "tool_cap", "web_search already made its 1 calls allowed per run")]
    assert own("read") == []  # another tool, uncapped


def test_a_denied_call_stops_the_run_as_if_it_had_crossed_the_threshold() -> None:
    h = Harness({"version": "pv-1", "budget": NO_BUDGETS})
    h.feed([("lookup", {"id": 1}, "same")] * 2)
    call = h.fingerprint("lookup", {"id": 1}, None)
    h.run.denied(call, "repeat", "lookup would be called 3 times")
    stopped = h.run.stopped
    assert stopped is not None
    assert (stopped.kind, stopped.severity, stopped.first_seq, stopped.last_seq, stopped.count, stopped.seqs,
            stopped.reason, stopped.tool, stopped.action, stopped.run_id, stopped.policy_version) == (
        "repeat", "stop", 3, 3, 1, (), "lookup would be called 3 times", "lookup", call.action, RUN_ID, "pv-1")
    later = h.fingerprint("other", {"q": 1}, None, seq=4)
    assert h.run.preview(later) == [("stop", "repeat", "the run was stopped earlier: lookup would be called 3 times")]


def test_summary_progress_once_observed_stays_observed() -> None:
    h = Harness({"budget": NO_BUDGETS})
    h.feed([("lookup", {"id": 1}, "v1"), ("lookup", {"id": 1}, "v2"), ("lookup", {"id": 1}, "v2")])
    assert [j.progressed for j in h.judgements] == [True, True, False]
    assert h.run.summary.progress_observed is True


def test_the_worst_severity_of_findings() -> None:
    h = Harness(EVERYTHING)
    everything(h)
    assert worst(h.findings) == "stop"
    assert worst([f for f in h.findings if f.severity != "stop"]) == "warn"
    assert worst([f for f in h.findings if f.severity == "info"]) == "info"
    assert worst([]) is None


def test_summary_new_items_once_observed_stay_observed() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"list": {"progress": {"items_field": "data"}}}}
    h = Harness(pol)
    h.call("list", {"p": 1}, {"data": ["a"]})
    h.call("list", {"p": 1}, {"data": ["a"]})  # nothing new, the same result
    assert [j.new_items for j in h.judgements] == [1, 0]
    assert h.run.summary.new_items_observed is True
