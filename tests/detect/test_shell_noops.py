"""Shell no-ops (conventions/shell.py): a command that changes and reads nothing (`true`, `:`,
`echo "done"`, `cd <dir> && true`, `pwd`) is a decision that brings nothing new and is no
work: it counts toward `no_progress`, it is no new side effect's acknowledgement, and it
neither continues nor breaks another action's `repeat` count.

Public report behind it: openai/codex#6970 (corpus case 025), `echo "All set."`, `true`,
`echo 'Done again.'`, `true`... after a clean `git status`. Negative control: case 043's row
of distinct silent side effects (`mkdir -p`, `echo x >> .gitignore`) stays quiet, with or
without a no-op before each of them.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from otel_loopguard.conventions.shell import is_noop

from .helpers import NO_BUDGETS, Harness, run, stop_at, loud

POLICY = {"budget": NO_BUDGETS}





def sh(line: str, out: str = "") -> tuple[str, dict[str, Any], str]:
    return ("shell", {"command": ["bash", "-lc", line], "workdir": "/srv/app"}, out)


@pytest.mark.parametrize("command", ["true", ":", "pwd", "cd /srv/app", "cd /srv/app && true", "echo 'All set.'",
                                     'echo "Done again."', "printf done", "true; :", ["echo", "hi"],
                                     ["bash", "-lc", "cd /srv/app && true"], ["/bin/sh", "-c", ":"]])
def test_noop_commands(command: Any) -> None:
    assert is_noop({"command": command}) and is_noop({"cmd": command})


@pytest.mark.parametrize("command", ["echo 'repos/' >> .gitignore", "echo x > f", "echo $HOME", 'echo "$(id)"',
                                     "echo `id`", "true | tee f", "true || rm -rf x", "cd x; make", "mkdir -p x",
                                     "git status", "echo a & rm b", "echo *", "(true)", "", "   ",
                                     ["bash", "run.sh"], ["bash", "-lc", "npm test"], ["rm", "-f", "x"],
                                     "true " + "x" * 600, 42, None])
def test_commands_that_are_work_or_read_something(command: Any) -> None:
    assert not is_noop({"command": command})


def test_only_a_command_argument_is_read() -> None:
    assert not is_noop({"query": "true"}) and not is_noop("true") and not is_noop(["true"])


def ritual_run(ritual: bool = True) -> list[tuple[Any, ...]]:
    """Case 025's shape: a clean status, then six calls that echo or do nothing."""
    steps = [sh("git status -sb", "## main...origin/main\n")]
    for i, text in enumerate(("All set.", "Done again.", "Final done", "Really done")):
        steps.append(sh(f"echo '{text}'", text + "\n") if ritual else sh(f"mkdir -p out/{i}"))
        steps.append(sh("true") if ritual else sh(f"touch out/{i}/.keep"))
    return steps


def test_echo_and_true_rituals_are_stopped_as_no_progress() -> None:
    h = run(ritual_run())
    assert all(c.equivalence.noop for c in h.calls[1:])
    assert stop_at(h) == 7 and h.kind("no_progress")[-1].severity == "stop"


def test_mutation_one_ritual_fewer_is_not_stopped() -> None:
    assert stop_at(run(ritual_run()[:6])) is None


def test_mutation_distinct_side_effects_in_their_place_are_quiet() -> None:
    h = run(ritual_run(ritual=False))
    assert loud(h) == [] and all(j.neutral for j in h.judgements[1:])


def test_mutation_with_the_echo_switch_off_no_command_is_a_noop() -> None:
    h = run(ritual_run(), {"budget": NO_BUDGETS, "equivalence": {"echo": False}})
    assert stop_at(h) is None  # the rituals are new actions' acknowledgements again


BOOTSTRAP = ("mkdir -p repos/github.com", "mkdir -p projects", "echo 'repos/' >> .gitignore",
             "echo 'projects/' >> .gitignore", "git init -q", "git config user.email bot@example.com",
             "touch projects/.keep", "git add .gitignore projects/.keep")


@pytest.mark.parametrize("noop", [None, "cd /srv/app", "pwd"])
def test_negative_control_a_noop_before_distinct_side_effects_stays_quiet(noop: Optional[str]) -> None:
    """Case 043, with a no-op before the first command, and a status that brings news at the end."""
    steps = ([sh(noop, "/srv/app\n" if noop == "pwd" else "")] if noop else []) + [sh(c) for c in BOOTSTRAP]
    steps.append(sh("git status --short", "A  .gitignore\nA  projects/.keep\n"))
    h = run(steps)
    assert loud(h) == []
    assert all(j.neutral for c, j in zip(h.calls, h.judgements) if not c.equivalence.noop and c.seq <= len(BOOTSTRAP))


def probe_run(ritual: Optional[str]) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    for _ in range(5):
        steps.append(sh("curl -sf localhost:8080/health", "curl: (7) Failed to connect: Connection refused"))
        if ritual:
            steps.append(sh(ritual, ""))
    return steps


def test_a_noop_between_two_tries_does_not_break_the_repeat_count() -> None:
    h = run(probe_run("true"))
    stops = [f for f in h.kind("repeat") if f.severity == "stop"]
    assert stops and stops[0].count == 5


def test_mutation_work_between_the_tries_breaks_the_repeat_count() -> None:
    h = run(probe_run("systemctl restart app"))
    assert [f for f in h.kind("repeat") if f.severity == "stop"] == []


def cd_then_work(work: bool = True) -> list[tuple[Any, ...]]:
    """A persistent shell: `cd` into a directory, then a silent command there, seven times."""
    steps: list[tuple[Any, ...]] = []
    for i, c in enumerate(("mkdir -p a", "touch a/x", "cp b c", "git add -A", "chmod +x r", "ln -s r s", "rm -f t")):
        steps.append(sh(f"cd /srv/p{i}"))
        if work:
            steps.append(sh(c))
    return steps


def test_negative_control_a_cd_before_each_silent_command_is_quiet() -> None:
    h = run(cd_then_work())
    assert all(c.equivalence.noop for c in h.calls[::2]) and loud(h) == []


def test_mutation_the_cds_alone_are_a_loop() -> None:
    assert stop_at(run(cd_then_work(work=False))) == 6
