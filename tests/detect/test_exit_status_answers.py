"""An exit status is a process's answer as well as its failure (issue 26): grep's "no match" and a
pipeline's status over valid output are answers when each command is new, a failure when the
same command fails again; and a number under a clock-named key is no content. Hand-written
cases, each with the mutation that must change the verdict."""

from __future__ import annotations

from typing import Any

from .helpers import NO_BUDGETS, Harness, run, loud

POLICY = {"budget": NO_BUDGETS}




def shell(command: str, stdout: str, code: int) -> tuple[Any, ...]:
    return ("shell", {"command": command}, {"stdout": stdout, "exit_code": code})


def test_distinct_commands_answering_with_an_exit_status_over_new_output_stay_quiet() -> None:
    steps = [shell(f"grep -n key{i} conf/{i}.yaml | head -1", f"{i}: key{i}: v{i}\n", 1) for i in range(6)]
    h = run(steps)
    assert [c.ok for c in h.calls] == [False] * 6  # still failed calls on their spans
    assert loud(h) == []


def test_distinct_checks_answering_no_match_stay_quiet() -> None:
    steps = [shell(f"grep -l PATTERN{i} /etc/app/*.yml", "", 1) for i in range(6)]
    assert loud(run(steps)) == []


def test_the_same_command_failing_by_its_exit_status_is_a_streak_from_its_first_call() -> None:
    steps = [shell("make test", "FAILED tests/test_api.py::test_login\n", 2) for _ in range(5)]
    h = run(steps)
    streak = [f for f in h.findings if f.kind == "error_streak"]
    assert [(f.severity, f.first_seq, f.last_seq) for f in streak] == [("warn", 1, 2), ("stop", 1, 4)]


def test_one_new_command_between_is_dropped_and_the_next_failure_counts_again() -> None:
    """Mutation check: a different command answering with a status in between breaks the
    held failure, so two runs of `make test` split by it never make four in a row."""
    steps = [shell("make test", "FAILED x\n", 2), shell("grep -n TODO src/a.py", "3: TODO\n", 1),
             shell("make test", "FAILED x\n", 2), shell("grep -n TODO src/b.py", "9: TODO\n", 1)]
    assert [f for f in run(steps).findings if f.kind == "error_streak"] == []


def test_an_error_flag_on_distinct_actions_is_still_a_streak() -> None:
    steps = [("mcp_tool", {"q": f"x{i}"}, {"isError": True, "content": [{"type": "text", "text": f"nope {i}"}]})
             for i in range(4)]
    assert ("error_streak", "stop") in loud(run(steps))


def test_a_clock_reading_under_its_key_is_no_news() -> None:
    steps = [("search", {"pattern": "Q3 margin"}, {"status": "success", "matches": [], "files_searched": 214,
                                                    "elapsed_ms": 40 + 3 * i}) for i in range(6)]
    assert ("repeat", "stop") in loud(run(steps))


def test_a_count_under_another_key_is_news() -> None:
    """Mutation check: the same number under a key that is no clock reading is content."""
    steps = [("search", {"pattern": "Q3 margin"}, {"status": "success", "matches": [], "files_searched": 214 + i})
             for i in range(6)]
    assert ("repeat", "stop") not in loud(run(steps))
