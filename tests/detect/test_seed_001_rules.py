"""The policy switches seed 001's rules need: `cycle.compare`, `repeat.progress_resets`,
`error_streak.same_tool`, and the packaged `seed-001` preset. Each with its negative control."""

from __future__ import annotations

import pytest

from otel_loopguard.errors import PolicyError
from otel_loopguard.policy import PRESETS, Policy, load_policy
from otel_loopguard.policy.load import preset_path

from .helpers import NO_BUDGETS, Harness


def ping_pong(compare: str, results: list, n: int = 6) -> list[tuple]:
    h = Harness({"cycle": {"compare": compare}, "budget": NO_BUDGETS})
    for i in range(n):
        h.call("read" if i % 2 == 0 else "write", {"q": "x"}, results[i])
    return [(f.kind, f.severity, f.first_seq, f.last_seq) for f in h.findings if f.kind == "cycle"]


def test_compare_actions_stops_a_ping_pong_whose_results_change_at_call_6() -> None:
    assert ping_pong("actions", list(range(6))) == [("cycle", "warn", 1, 4), ("cycle", "stop", 1, 6)]


def test_compare_results_leaves_the_same_ping_pong_alone() -> None:
    assert ping_pong("results", list(range(6))) == []


def test_both_comparisons_stop_a_ping_pong_with_unchanged_results() -> None:
    assert ping_pong("results", ["same"] * 6) == ping_pong("actions", ["same"] * 6) != []


def test_mutation_remove_the_sixth_call_and_the_stop_disappears() -> None:
    assert [f for f in ping_pong("actions", list(range(6)), n=5) if f[1] == "stop"] == []


def test_compare_actions_preview_denies_the_sixth_call_before_it_runs() -> None:
    h = Harness({"cycle": {"compare": "actions"}, "budget": NO_BUDGETS})
    for i in range(5):
        h.call("read" if i % 2 == 0 else "write", {"q": "x"}, i)
    proposed = h.fingerprint("write", {"q": "x"}, None, finished=False)
    assert [(level, kind) for level, kind, _ in h.run.preview(proposed)] == [("stop", "cycle")]


@pytest.mark.parametrize("resets,expected", [(True, []), (False, [("repeat", "warn", 3), ("repeat", "stop", 5)])])
def test_progress_resets_decides_whether_new_results_clear_the_repeat_count(resets: bool, expected: list) -> None:
    h = Harness({"repeat": {"progress_resets": resets}, "budget": NO_BUDGETS})
    for i in range(5):
        h.call("search", {"q": "x"}, {"n": i})  # every result new: progress
    assert [(f.kind, f.severity, f.count) for f in h.findings if f.kind == "repeat"] == expected


def alternating_failures(same_tool: bool) -> list[tuple]:
    h = Harness({"error_streak": {"same_tool": same_tool}, "budget": NO_BUDGETS})
    for i in range(6):
        h.call("parse" if i % 2 else "load", {"n": i}, "ValueError: bad input", ok=False)
    return [(f.kind, f.severity) for f in h.findings if f.kind == "error_streak"]


def test_same_tool_streaks_ignore_failures_of_alternating_tools() -> None:
    assert alternating_failures(True) == []
    assert alternating_failures(False) == [("error_streak", "warn"), ("error_streak", "stop")]  # control


def test_same_tool_still_stops_one_tool_failing_four_times() -> None:
    h = Harness({"error_streak": {"same_tool": True}, "budget": NO_BUDGETS})
    for i in range(4):
        h.call("parse", {"n": i}, "ValueError: bad input", ok=False)
    assert [(f.severity, f.last_seq) for f in h.findings if f.kind == "error_streak"] == [("warn", 2), ("stop", 4)]


@pytest.mark.parametrize("bad", [{"cycle": {"compare": "digests"}}, {"no_progress": {"same_tool": True}},
                                 {"repeat": {"progress_resets": "no"}}])
def test_bad_values_name_their_key(bad: dict) -> None:
    from otel_loopguard.policy import policy_from_mapping

    with pytest.raises(PolicyError, match=next(iter(bad))):
        policy_from_mapping(bad)


def test_the_seed_001_preset_is_packaged_and_loads_by_name() -> None:
    assert "seed-001" in PRESETS
    path = preset_path("seed-001")
    assert path is not None and path.is_file()
    p = load_policy("seed-001")
    assert p.version == "seed-001"
    assert (p.budget.max_turns, p.budget.max_tool_calls, p.budget.max_cost_usd, p.budget.max_seconds) == (25, 60, 2.0, 300.0)
    assert (p.repeat.mode, p.repeat.window, p.repeat.warn_at, p.repeat.stop_at, p.repeat.progress_resets) == (
        "window", 20, 3, 5, False)
    assert (p.error_streak.warn_at, p.error_streak.stop_at, p.error_streak.same_tool) == (2, 4, True)
    assert (p.cycle.compare, p.cycle.min_period, p.cycle.max_period, p.cycle.warn_at, p.cycle.stop_at) == (
        "actions", 2, 4, 2, 3)
    assert (p.no_progress.warn_at, p.no_progress.stop_at) == (3, 6)
    assert p.result_volatile_fields == {"timestamp", "request_id", "trace_id", "nonce", "created_at"}
    assert load_policy(None) == Policy()  # the built-in default is unchanged


def test_a_file_named_like_a_preset_wins(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "seed-001").write_text("version: mine\n", encoding="utf-8")
    assert load_policy("seed-001").version == "mine"


def test_the_preset_is_declared_as_package_data() -> None:
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "presets/*.yaml" in pyproject["tool"]["setuptools"]["package-data"]["otel_loopguard"]
