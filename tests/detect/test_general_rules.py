"""Loops from the public-report corpus's misses, stopped by general rules (issue 26), each with
a negative control and a mutation check, through the real fingerprinting and detectors.

- A number under a key that names a clock reading is volatile, inside text too.
- How often the agent did something (`read 3×`) is a counter, not an answer.
- A label made of one of the call's own words and a number is an echo with a counter.
- A call of another action that brings nothing new (the answer the run already had) neither
  extends nor breaks an error streak; the failing action itself succeeding ends it.
"""

from __future__ import annotations

from typing import Any, Optional

from .helpers import NO_BUDGETS, Harness

POLICY = {"budget": NO_BUDGETS}
LOOP_KINDS = {"repeat", "cycle", "no_progress", "error_streak"}


def run(steps: list[tuple[Any, ...]]) -> Harness:
    h = Harness(POLICY)
    h.feed(steps)
    return h


def stop_at(h: Harness) -> Optional[int]:
    seqs = [seq for f, seq in zip(h.findings, h.at) if f.severity == "stop" and f.kind in LOOP_KINDS]
    return min(seqs) if seqs else None


def loud(h: Harness) -> list[tuple[str, str]]:
    return [(f.kind, f.severity) for f in h.findings if f.kind in LOOP_KINDS and f.severity in ("warn", "stop")]


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
