"""One loop, one finding to read (findings/episodes.py): a warn folds into its stop, kinds over
the same calls group under one primary; negative controls keep separate loops and tools apart."""

from __future__ import annotations

from typing import Any

from otel_loopguard.findings import Finding
from otel_loopguard.findings.episodes import Episode, plan, warned_at


def f(kind: str, severity: str, seqs: tuple[int, ...], **over: Any) -> Finding:
    fields: dict[str, Any] = dict(kind=kind, severity=severity, first_seq=seqs[0], last_seq=seqs[-1],
                                  count=len(seqs), seqs=seqs, span_ids=tuple(f"{s:016x}" for s in seqs),
                                  reason="r", tool="lookup_order", action="d1", run_id="run")
    fields.update(over)
    return Finding(**fields)


# The case: four findings for one loop of lookup_order over calls 1-5.
ONE_LOOP = [f("repeat", "warn", (1, 2, 3)), f("no_progress", "warn", (2, 3)),
            f("repeat", "stop", (1, 2, 3, 4, 5)), f("no_progress", "stop", (2, 3, 4))]


def test_one_loop_of_four_findings_reads_as_one_episode_with_the_repeat_stop_first() -> None:
    assert plan(ONE_LOOP) == [Episode(primary=2, warned=(0,), members=(3,), member_warned={3: (1,)})]
    assert warned_at(ONE_LOOP, (0,)) == 3


def test_every_finding_lands_in_exactly_one_place() -> None:
    placed = []
    for e in plan(ONE_LOOP):
        placed += [e.primary, *e.warned, *e.members, *(w for ws in e.member_warned.values() for w in ws)]
    assert sorted(placed) == [0, 1, 2, 3]


def test_negative_two_separate_loops_of_one_action_stay_two_findings() -> None:
    found = [f("repeat", "warn", (1, 2, 3)), f("repeat", "stop", (1, 2, 3, 4, 5)),
             f("repeat", "warn", (10, 11, 12)), f("repeat", "stop", (10, 11, 12, 13, 14))]
    assert plan(found) == [Episode(primary=1, warned=(0,)), Episode(primary=3, warned=(2,))]


def test_negative_different_tools_or_actions_or_runs_stay_apart() -> None:
    other_tool = [f("repeat", "stop", (1, 2, 3)), f("no_progress", "stop", (1, 2, 3), tool="search")]
    assert len(plan(other_tool)) == 2
    other_action = [f("repeat", "warn", (1, 2, 3)), f("repeat", "stop", (1, 2, 3, 4), action="d2")]
    assert len(plan(other_action)) == 2
    other_run = [f("repeat", "warn", (1, 2, 3)), f("repeat", "stop", (1, 2, 3, 4), run_id="other")]
    assert len(plan(other_run)) == 2


def test_negative_integrity_and_budget_findings_are_never_grouped() -> None:
    found = [f("repeat", "stop", (1, 2, 3)), f("incomplete_trace", "warn", (2,)),
             f("budget", "stop", (3,), tool=None, action=None), f("tool_cap", "stop", (3,))]
    assert [e.primary for e in plan(found)] == [0, 1, 2, 3]


def test_the_toolless_no_progress_joins_the_loop_whose_calls_it_shares() -> None:
    """As the detectors report it: no_progress is about the run's decisions and names no tool."""
    found = [f("repeat", "warn", (1, 2, 3)), f("no_progress", "warn", (2, 3, 4), tool=None, action=None),
             f("repeat", "stop", (1, 2, 3, 4, 5)), f("no_progress", "stop", (2, 3, 4, 5, 6), tool=None, action=None)]
    assert plan(found) == [Episode(primary=2, warned=(0,), members=(3,), member_warned={3: (1,)})]
    apart = [f("repeat", "stop", (1, 2, 3)), f("no_progress", "stop", (5, 6, 7), tool=None, action=None)]
    assert len(plan(apart)) == 2


def test_a_warn_after_its_stop_or_of_another_kind_is_not_folded() -> None:
    later = [f("repeat", "stop", (1, 2, 3)), f("repeat", "warn", (3, 4, 5))]  # the warn goes past the stop
    assert all(not e.warned for e in plan(later))
    kinds = [f("no_progress", "warn", (1, 2)), f("repeat", "stop", (1, 2, 3))]
    assert plan(kinds) == [Episode(primary=1, members=(0,))]  # grouped as a member, not folded


def test_mutation_without_a_shared_call_the_kinds_part() -> None:
    shared = [f("repeat", "stop", (1, 2, 3)), f("no_progress", "stop", (3, 4))]
    assert len(plan(shared)) == 1
    apart = [f("repeat", "stop", (1, 2, 3)), f("no_progress", "stop", (4, 5))]
    assert len(plan(apart)) == 2


def test_the_primary_is_the_most_severe_then_the_kind_listed_first() -> None:
    found = [f("no_progress", "stop", (1, 2, 3)), f("repeat", "warn", (1, 2, 3, 4), action="d9")]
    assert plan(found)[0].primary == 0  # a stop outranks a warn of a kind listed earlier
    found = [f("no_progress", "stop", (1, 2, 3)), f("repeat", "stop", (2, 3))]
    assert plan(found)[0].primary == 1


def test_without_span_ids_calls_are_matched_by_sequence() -> None:
    found = [f("repeat", "stop", (1, 2, 3), span_ids=(None, None, None)),
             f("no_progress", "stop", (3, 4), span_ids=(None, None))]
    assert len(plan(found)) == 1
