"""Loops from the public-report corpus's misses, stopped by general rules (issue 26), each with
a negative control and a mutation check, through the real fingerprinting and detectors.

- A number under a key that names a clock reading is volatile, inside text too.
- How often the agent did something (`read 3×`) is a counter, not an answer.
- A label made of one of the call's own words and a number is an echo with a counter.
- A call of another action that brings nothing new (the answer the run already had) neither
  extends nor breaks an error streak; the failing action itself succeeding ends it.
- The same action giving the same answer again at least every other decision is a loop, whatever
  single call comes between (a read); a new side effect answered "ok" between starts it again,
  and an answer with no content (a sleep) is a cadence.
"""

from __future__ import annotations

from typing import Any, Optional

from .helpers import NO_BUDGETS, Harness, run, stop_at, loud

POLICY = {"budget": NO_BUDGETS}





# ---- a clock reading under its key --------------------------------------------------------

def health(i: int, status: str = "unhealthy") -> str:
    return (f"HTTP/1.1 503 Service Unavailable\r\nX-Request-Id: {i:08x}-aaaa-bbbb-cccc-{i:012x}\r\n\r\n"
            f'{{"status":"{status}","uptime_ms":{428829 + 11123 * i},"db":"connection refused"}}')


def test_a_health_check_whose_answer_differs_only_in_uptime_is_stopped() -> None:
    h = run([("run_command", {"command": "curl -si localhost:8080/healthz"}, health(i)) for i in range(7)])
    assert stop_at(h) == 5  # repeat: the fifth equivalent call


def test_negative_control_a_health_check_that_comes_up_is_quiet() -> None:
    statuses = ["starting", "migrating", "warming", "degraded", "healthy"]
    h = run([("run_command", {"command": "curl -si localhost:8080/healthz"}, health(i, s)) for i, s in enumerate(statuses)])
    assert loud(h) == []


def test_mutation_without_the_clock_key_rule_the_uptime_is_content() -> None:
    # The same counter under a key that names no clock is content: every answer is new.
    steps = [("run_command", {"command": "curl -si localhost:8080/healthz"}, health(i).replace("uptime_ms", "requests"))
             for i in range(7)]
    assert stop_at(run(steps)) is None


# ---- a repetition count in the footer -------------------------------------------------------

def reread(k: int, body: str = "fn main() {}\nlet x = 1;") -> str:
    return f"{body}\n\n(2/2 lines shown · read {k}× this session)"


def test_rereading_an_unchanged_file_whose_footer_counts_the_reads_is_stopped() -> None:
    assert stop_at(run([("read_file", {"path": "src/main.rs"}, reread(k)) for k in range(1, 8)])) == 5


def test_negative_control_rereading_a_file_that_changes_each_time_is_not_a_repeat() -> None:
    h = run([("read_file", {"path": "src/main.rs"}, reread(k, f"fn main() {{}}\nlet x = {k};")) for k in range(1, 8)])
    assert ("repeat", "stop") not in loud(h)


def test_mutation_a_count_written_as_a_dimension_is_content() -> None:
    h = run([("read_file", {"path": "src/main.rs"}, reread(k).replace(f"{k}×", f"{k}×4")) for k in range(1, 8)])
    assert stop_at(h) is None


# ---- an echo with a counter -----------------------------------------------------------------

def noop(i: int, word: str = "noop") -> dict[str, Any]:
    return {"stdout": "noop\n", "exit_code": 0, "label": f"{word}{131 + i}", "duration_ms": 3 + i % 4}


def test_an_echo_labelled_with_a_counter_is_stopped() -> None:
    h = run([("fabric_exec", {"command": "bash", "args": ["-c", "echo noop"]}, noop(i)) for i in range(8)])
    assert stop_at(h) == 5


def test_negative_control_distinct_echo_commands_stay_quiet() -> None:
    # Different rituals, each a new action's acknowledgement: neutral, never a loop.
    h = run([("fabric_exec", {"command": "bash", "args": ["-c", f"echo step{i}"]}, {"stdout": f"step{i}\n", "exit_code": 0})
             for i in range(8)])
    assert loud(h) == []


def test_mutation_a_counted_label_of_another_word_is_new_each_time() -> None:
    h = run([("fabric_exec", {"command": "bash", "args": ["-c", "echo noop"]}, noop(i, word="job")) for i in range(8)])
    assert stop_at(h) is None


# ---- a re-read between failed edits ---------------------------------------------------------

SOURCE = "def parse(line):\n    parts = line.split(',')\n    return parts\n"


def edit_loop(n: int, read: Any = lambda i: SOURCE) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = [("read_file", {"path": "parse.py"}, SOURCE)]
    for i in range(n):
        steps.append(("replace", {"path": "parse.py", "old": f"parts = line.split({i})", "new": "x"},
                      {"error": "0 occurrences found for old_string"}, None, False))
        steps.append(("read_file", {"path": "parse.py"}, read(i)))
    return steps


def test_failed_edits_with_rereads_of_the_unchanged_file_between_are_an_error_streak() -> None:
    h = run(edit_loop(6))
    assert stop_at(h) == 8  # the fourth failed edit (calls 2, 4, 6, 8)
    assert any(f.kind == "error_streak" and f.severity == "stop" for f in h.findings)


def test_negative_control_a_read_that_shows_a_changed_file_breaks_the_streak() -> None:
    h = run(edit_loop(6, read=lambda i: SOURCE + f"# edited by hand {i}\n"))
    assert not any(f.kind == "error_streak" and f.severity in ("warn", "stop") for f in h.findings)


def test_negative_control_the_failing_action_succeeding_ends_the_streak() -> None:
    fail = ("parse", {"n": 1}, {"error": "bad"}, None, False)
    ok = ("parse", {"n": 1}, {"parsed": 1}, None, True)
    h = run([fail, ok, fail, ok, fail, ok, fail, ok])
    assert not any(f.kind == "error_streak" for f in h.findings)


def test_mutation_a_new_sides_effects_acknowledgement_between_failures_breaks_the_streak() -> None:
    steps = [("read_file", {"path": "parse.py"}, SOURCE)]
    for i in range(6):
        steps.append(("replace", {"path": "parse.py", "old": f"split({i})", "new": "x"}, {"error": "0 occurrences"}, None, False))
        steps.append(("write_file", {"path": f"notes{i}.md", "content": f"try {i}"}, "ok"))
    assert not any(f.kind == "error_streak" and f.severity == "stop" for f in run(steps).findings)


# ---- the same answer at least every other decision (detect/spread.py) ------------------------

def failing_test(i: int) -> dict[str, Any]:
    return {"exit_code": 101, "stdout": f"running 18 tests\ntest loop_detect::ping_pong ... FAILED\n"
            f"test result: FAILED. 17 passed; 1 failed; finished in {0.31 + i / 100:.2f}s"}


def interleaved(n: int, read: Any = lambda i: f"// file {i}\nfn f{i}() {{}}") -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    for i in range(n):
        steps.append(("bash", {"command": "cargo test -p core loop_detect"}, failing_test(i), None, False))
        steps.append(("read_file", {"path": f"src/m{i}.rs"}, read(i)))
    return steps


def test_the_same_failing_run_between_reads_of_new_files_is_stopped_at_its_fifth_try() -> None:
    h = run(interleaved(7))
    assert stop_at(h) == 9
    (f,) = [f for f in h.findings if f.kind == "cycle" and f.severity == "stop"]
    assert f.seqs == (1, 3, 5, 7, 9) and "read_file" in f.reason and f.tool == "bash"


def test_the_same_write_on_both_sides_of_a_read_is_stopped() -> None:
    w = ("write", {"path": "out.csv", "content": "a,b\n1,2\n"}, "Written 8 bytes to out.csv")
    h = run([w, w, w, ("read", {"path": "out.csv"}, "a,b\n1,2"), w, w, w])
    assert stop_at(h) == 6


def test_negative_control_a_test_run_after_each_edit_is_quiet() -> None:
    # An edit answered "ok" between two runs is work: the count starts again.
    steps: list[tuple[Any, ...]] = []
    for i in range(7):
        steps.append(("bash", {"command": "cargo test -p core loop_detect"}, failing_test(i), None, False))
        steps.append(("edit_file", {"path": f"src/m{i}.rs", "patch": f"fix {i}"}, "ok"))
    assert not [f for f in run(steps).findings if f.kind == "cycle"]


def test_negative_control_a_sleep_between_polls_that_advance_is_quiet() -> None:
    steps: list[tuple[Any, ...]] = []
    for i in range(7):
        steps.append(("bash", {"command": "sleep 60"}, "[Command finished with exit code 0]"))
        steps.append(("bash", {"command": "tail -n 3 build.log"}, f"> Task :m{i}:compileJava\n> Task :m{i}:classes"))
    assert loud(run(steps)) == []


def test_mutation_two_decisions_between_the_tries_is_no_longer_every_other() -> None:
    steps: list[tuple[Any, ...]] = []
    for i in range(7):
        steps.append(("bash", {"command": "cargo test -p core loop_detect"}, failing_test(i), None, False))
        steps.append(("read_file", {"path": f"src/m{i}.rs"}, f"fn f{i}() {{}}"))
        steps.append(("read_file", {"path": f"src/n{i}.rs"}, f"fn g{i}() {{}}"))
    assert not [f for f in run(steps).findings if f.kind == "cycle"]


def test_mutation_a_test_run_whose_answer_changes_starts_again() -> None:
    steps = interleaved(7)
    steps[4] = ("bash", {"command": "cargo test -p core loop_detect"}, {"exit_code": 101, "stdout": "2 failed"}, None, False)
    h = run(steps)
    assert stop_at(h) is None or stop_at(h) > 9


def test_a_strict_alternation_is_left_to_cycle() -> None:
    # A, B, A, B...: the block rule's finding; the loose rule adds no second one per action.
    a = ("bash", {"command": "cargo test"}, failing_test(0), None, False)
    b = ("read_file", {"path": "src/lib.rs"}, "fn lib() {}")
    h = run([a, b] * 6)
    cycles = [f for f in h.findings if f.kind == "cycle" and f.severity == "stop"]
    assert len(cycles) == 1 and "gave the same answer" not in cycles[0].reason


def test_the_loose_cycle_switch_turns_the_rule_off_for_one_tool_only() -> None:
    off = {"budget": NO_BUDGETS, "tools": {"bash": {"loose_cycle": False}}}
    assert not [f for f in run(interleaved(7), off).findings if f.kind == "cycle"]
    other = {"budget": NO_BUDGETS, "tools": {"read_file": {"loose_cycle": False}}}
    assert stop_at(run(interleaved(7), other)) == 9  # the switch of another tool changes nothing
    assert stop_at(run(interleaved(7), {"budget": NO_BUDGETS, "tools": {"bash": {"loose_cycle": True}}})) == 9
