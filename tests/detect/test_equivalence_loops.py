"""Loops that hide in noise (issue 26), each class with its mutation checks and negative controls.

Every case goes through fingerprint_call and Run, as a shell hands it over. For each class:
the loop is stopped; with its noise removed it is still stopped (the noise, not a lucky
digest, is what equivalence sees through); with results made truly new it is not flagged;
with one call fewer the finding disappears (or comes later); and a look-alike that is work
stays quiet. Cases are the issue's classes written by hand, not taken from any corpus.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from .helpers import NO_BUDGETS, Harness, run, stop_at, loud

POLICY = {"budget": NO_BUDGETS}





# ---- 1. volatile fragments inside text ---------------------------------------------------------

def failing_log(n: int, noisy: bool = True) -> str:
    if not noisy:
        n = 0
    return (f"2026-12-06 06:40:{10 + n:02d}.{(37 * n) % 1000:03d} ERROR [pid {4711 + n}] attempt {n + 1}: "
            f"could not connect to postgres at db:5432 after {120 + 7 * n}ms\n"
            f"traceback saved to /tmp/tmp{n}a9x/trace.txt\nretrying is not going to help")


def shell_loop(n: int, noisy: bool = True, new: bool = False) -> list[tuple[Any, ...]]:
    out = []
    for i in range(n):
        result = failing_log(i, noisy) + (f"\nnew finding {i}" if new else "")
        out.append(("run_shell", {"command": "python manage.py migrate"}, result))
    return out


def test_a_failure_that_differs_only_in_clock_pid_attempt_and_temp_path_is_stopped() -> None:
    h = run(shell_loop(8))
    assert stop_at(h) == 5  # repeat: warn at 3, stop at 5
    assert len({c.exact or c.result for c in h.calls}) == 8 and len({c.equivalence.shape for c in h.calls}) == 1


def test_shell_loop_mutations() -> None:
    assert stop_at(run(shell_loop(8, noisy=False))) == 5  # the noise removed: still the same loop
    assert loud(run(shell_loop(8, new=True))) == []  # every answer brings a new line: work
    assert stop_at(run(shell_loop(4))) is None  # one call fewer than the stop: no stop


def test_negative_control_a_job_whose_progress_advances_inside_its_text_is_quiet() -> None:
    steps = [("job_status", {"job": "export-7"}, f"export-7: {10 * i}% done, elapsed {3 * i}s at 06:40:{i:02d}")
             for i in range(10)]
    assert loud(run(steps)) == []


# ---- 2. failure reported by the result's shape ------------------------------------------------------------

def pytest_run(failed: int, seconds: float, code: Optional[int] = None) -> dict[str, Any]:
    lines = [f"FAILED tests/test_api.py::test_case_{k} - AssertionError" for k in range(failed)]
    summary = f"{failed} failed, {12 - failed} passed in {seconds:.2f}s" if failed else f"12 passed in {seconds:.2f}s"
    return {"exit_code": (1 if failed else 0) if code is None else code, "stdout": "\n".join(lines + [summary])}


def test_the_same_failing_test_run_with_other_timings_is_an_error_streak_and_a_repeat() -> None:
    h = run([("run_tests", {"path": "tests"}, pytest_run(2, 1.1 + i / 10)) for i in range(6)])
    assert all(c.ok is False and c.equivalence.failed == "exit_code" for c in h.calls)
    streak = h.kind("error_streak")
    assert [f.severity for f in streak] == ["warn", "stop"] and h.fired_at(streak[-1]) == 4
    assert "the same error each time" in streak[-1].reason  # timings differ: the same error all the same
    assert stop_at(h) == 4


def test_text_exit_status_counts_as_a_failure_and_exit_0_does_not() -> None:
    h = run([("sh", {"cmd": "make"}, "make: *** [all] Error 2\nCommand exited with code 2")] * 4)
    assert [c.ok for c in h.calls] == [False] * 4 and h.kind("error_streak")
    h = run([("sh", {"cmd": f"make t{i}"}, f"built t{i}\nCommand exited with code 0") for i in range(4)])
    assert [c.ok for c in h.calls] == [True] * 4 and loud(h) == []


def test_failure_fields_follow_the_policy() -> None:
    steps = [("mcp_tool", {"q": f"x{i}"}, {"isError": True, "content": [{"type": "text", "text": f"nope {i}"}]})
             for i in range(4)]
    assert {f.kind for f in run(steps).findings} >= {"error_streak"}
    off = {"budget": NO_BUDGETS, "equivalence": {"failure_fields": [], "failure_text": False}}
    assert run(steps, off).kind("error_streak") == []  # the switch names what counts


def test_negative_control_test_fix_test_with_fewer_failures_each_time_is_quiet() -> None:
    steps: list[tuple[Any, ...]] = []
    for k, failed in enumerate((4, 3, 2, 1, 0)):
        steps.append(("run_tests", {"path": "tests"}, pytest_run(failed, 1.3 + k / 7)))
        if failed:
            steps.append(("edit_file", {"path": f"src/api_{k}.py", "patch": f"fix number {k}"}, "ok"))
    h = run(steps)
    assert [c.ok for c in h.calls if c.tool == "run_tests"] == [False] * 4 + [True]
    assert loud(h) == []


# ---- 3. the same items, in another order or another subset -----------------------------------------

QUERIES = ("python asyncio timeout error fix", "fix python asyncio timeout error",
           "asyncio timeout error python fix how", "python asyncio timeout error fix example",
           "python fix for asyncio timeout error", "asyncio timeout error fix python 3.12",
           "python asyncio timeout error fix stackoverflow", "python asyncio timeout error how to fix")


def hits(seed: int, urls: range = range(6), fresh: bool = False) -> list[dict[str, str]]:
    picked = [u for u in urls if (u + seed) % 5 != 0] if seed else list(urls)  # another subset each time
    random.Random(seed).shuffle(picked)  # ... in another order
    base = 100 * seed if fresh else 0
    return [{"url": f"https://example.org/asyncio/{base + u}", "title": f"Asyncio timeouts {base + u}",
             "snippet": f"posted {seed + 2} days ago"} for u in picked]


def search_loop(n: int, fresh: bool = False, same_query: bool = False) -> list[tuple[Any, ...]]:
    return [("web_search", {"query": QUERIES[0 if same_query else i]}, hits(i, fresh=fresh)) for i in range(n)]


def test_reworded_searches_that_return_the_same_hits_reranked_are_stopped() -> None:
    h = run(search_loop(8))
    assert len({c.action for c in h.calls}) == 8 and len({c.result for c in h.calls}) == 8
    assert [j.novel_result for j in h.judgements] == [True] + [False] * 7
    assert stop_at(h) is not None and stop_at(h) <= 7
    assert any("near-identical" in f.reason for f in h.kind("repeat"))


def test_search_loop_mutations() -> None:
    assert stop_at(run(search_loop(8, same_query=True))) == 5  # the noise removed: a plain repeat
    assert loud(run(search_loop(8, fresh=True))) == []  # new hits every time: research going on
    h = run(search_loop(4))  # a few calls: warns, no stop
    assert stop_at(h) is None


def test_negative_control_paging_that_brings_new_items_is_quiet() -> None:
    steps = [("web_search", {"query": QUERIES[0], "page": p}, hits(0, range(10 * p, 10 * p + 10)))
             for p in range(1, 12)]
    assert loud(run(steps)) == []


def reader(offset: int, limit: int = 40) -> str:
    return "\n".join(f"{k:5d}  row {k}: value={k * k % 97}" for k in range(offset, offset + limit))


def test_a_reader_rereading_through_shifted_windows_is_stopped() -> None:
    offsets = (0, 10, 5, 20, 15, 0, 10, 5, 20, 15)  # within lines 0..59, read already by call 4
    steps = [("read_file", {"path": "data.csv", "offset": o, "limit": 40}, reader(o)) for o in offsets]
    h = run(steps)
    assert stop_at(h) is not None and stop_at(h) <= 10
    assert h.kind("no_progress")


def test_negative_control_reading_a_long_file_again_after_each_edit_is_quiet() -> None:
    """The same request (cat a 300-line file) after each edit: one changed line in a long
    answer whose sample may not hold it. Its answer changed: that is news."""
    lines = [f"line {k}: value {k * 7}" for k in range(300)]
    steps: list[tuple[Any, ...]] = []
    for i in range(8):
        lines[100 + i] = f"line {100 + i}: fixed in edit {i}"
        steps.append(("edit_file", {"path": "src/big.py", "line": 100 + i, "text": f"fixed in edit {i}"}, "ok"))
        steps.append(("read_file", {"path": "src/big.py"}, "\n".join(lines)))
    assert loud(run(steps)) == []


def test_the_same_search_answered_with_the_same_hits_reranked_is_stopped() -> None:
    steps = [("web_search", {"query": QUERIES[0]}, hits(i, urls=range(5), fresh=False)) for i in range(8)]
    h = run(steps)
    assert len({c.result for c in h.calls}) > 1 and stop_at(h) == 5


def test_negative_control_reading_a_file_window_by_window_is_quiet() -> None:
    steps = [("read_file", {"path": "data.csv", "offset": o, "limit": 40}, reader(o)) for o in range(0, 600, 40)]
    assert loud(run(steps)) == []


# ---- 4. the same request, reworded: a re-prompted sub-agent ------------------------------------------

PREAMBLES = ("", "Again: ", "Please try once more. ", "Third time asking: ", "I need this now. ", "Last try: ",
             "Retry: ", "Once more, carefully: ")
TASK = "research the pricing of the three largest cloud vendors and summarise it in a table"


def delegate_loop(n: int, refusal: Callable[[int], str] = lambda i: "I cannot browse the web, so I cannot do that.",
                  same: bool = False) -> list[tuple[Any, ...]]:
    return [("researcher", {"input": ("" if same else PREAMBLES[i]) + TASK}, refusal(i)) for i in range(n)]


def test_a_sub_agent_asked_again_with_new_preambles_and_the_same_refusal_is_stopped() -> None:
    h = run(delegate_loop(8))
    assert len({c.action for c in h.calls}) == 8
    assert stop_at(h) == 5 and "near-identical" in h.kind("repeat")[-1].reason


def test_sub_agent_mutations() -> None:
    assert stop_at(run(delegate_loop(8, same=True))) == 5
    answers = run(delegate_loop(8, refusal=lambda i: f"| vendor {i} | price {i} |"))  # a new answer each time
    assert loud(answers) == []
    assert stop_at(run(delegate_loop(4))) is None


def test_near_duplicates_follow_the_similarity_threshold() -> None:
    strict = {"budget": NO_BUDGETS, "equivalence": {"similarity": 1.0}}
    off = {"budget": NO_BUDGETS, "equivalence": {"similarity": None}}
    assert not any("near-identical" in f.reason for f in run(delegate_loop(8), strict).kind("repeat"))
    assert run(delegate_loop(8), off).kind("repeat") == []
    assert run(delegate_loop(8), off).kind("no_progress")  # still judged on its results


# ---- 5. echoes and rituals --------------------------------------------------------------------------

def ritual_loop(n: int, echo: bool = True) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    for i in range(n):
        steps.append(("run_shell", {"command": "curl -sf http://localhost:8080/health"},
                      "curl: (7) Failed to connect to localhost port 8080: Connection refused"))
        if echo:
            steps.append(("run_shell", {"command": f"echo 'waiting for the server, try {i}'"},
                          f"waiting for the server, try {i}"))
    return steps


def test_a_loop_with_an_echo_ritual_between_its_tries_is_stopped() -> None:
    h = run(ritual_loop(8))
    echoes = [(c, j) for c, j in zip(h.calls, h.judgements) if c.seq % 2 == 0]
    # A shell no-op (conventions/shell.py): nothing new, and no work.
    assert echoes and all(c.equivalence.noop and not j.neutral and not j.new_information for c, j in echoes)
    assert stop_at(h) is not None and stop_at(h) <= 9  # the 5th try: the echoes do not reset it


def test_ritual_mutations() -> None:
    assert stop_at(run(ritual_loop(8, echo=False))) == 5
    # Four tries: no repeat stop. The echoes are shell no-ops (conventions/shell.py), decisions
    # that bring nothing new, so 7 such decisions after the first try are no_progress's stop.
    short = run(ritual_loop(4))
    assert [f for f in short.kind("repeat") if f.severity == "stop"] == []
    assert stop_at(short) == 7 and short.kind("no_progress")[-1].severity == "stop"


def test_an_echo_is_nothing_new_but_a_new_line_is() -> None:
    # Not a shell command: a new action's echo is an acknowledgement (neutral).
    h = run([("say", {"text": "building"}, "building"), ("say", {"text": "building"}, "building")])
    assert h.calls[0].equivalence.echoed == 1 and h.calls[0].equivalence.ack and not h.calls[0].equivalence.noop
    assert [j.neutral for j in h.judgements] == [True, False]
    # A shell `echo` is a no-op: nothing new, and no acknowledgement of work either.
    h = run([("sh", {"command": "echo building"}, "building"), ("sh", {"command": "echo building"}, "building")])
    assert h.calls[0].equivalence.echoed == 1 and h.calls[0].equivalence.noop
    assert [(j.neutral, j.new_information) for j in h.judgements] == [(False, False), (False, False)]


def test_negative_control_distinct_side_effect_commands_with_empty_success_are_quiet() -> None:
    """The false positive the issue reports: each returned an empty success, all different."""
    commands = ("mkdir -p build", "cp config.example build/config", "chmod +x build/run.sh", "git add -A",
                "touch build/.stamp", "ln -sf build/run.sh run", "git commit -qm 'build dir'", "rm -f tmp.lock")
    h = run([("run_shell", {"command": c}, "") for c in commands])
    assert loud(h) == [] and all(j.neutral for j in h.judgements)
    h = run([("write_file", {"path": f"src/m{i}.py", "content": f"x = {i}"}, {"ok": True, "path": f"src/m{i}.py"})
             for i in range(8)])
    assert loud(h) == []


def test_negative_control_batch_work_over_many_files_is_quiet() -> None:
    steps = [("read_file", {"path": f"src/module_{i}.py"}, f"def f{i}():\n    return {i}\n") for i in range(30)]
    steps += [("run_shell", {"command": f"ruff check src/module_{i}.py"}, "") for i in range(30)]
    assert loud(run(steps)) == []


def test_an_edit_between_two_runs_of_an_unchanged_check_breaks_the_repeat_count() -> None:
    """A new side effect answered "ok" is work, not a ritual: it breaks a repeat count (an
    echo does not). Six unchanged checks in a row still end in no_progress."""
    steps: list[tuple[Any, ...]] = []
    for i in range(4):
        steps.append(("run_shell", {"command": "git status --short"}, " M src/app.py"))
        steps.append(("edit_file", {"path": "src/app.py", "patch": f"change {i}"}, "ok"))
    h = run(steps)
    assert h.kind("repeat") == [] and [j.neutral for j in h.judgements[1::2]] == [True] * 4
    assert stop_at(h) is None


def test_the_same_empty_command_again_and_again_is_still_a_loop() -> None:
    """Neutral is for a NEW action's acknowledgement only: one command repeated is a repeat."""
    h = run([("run_shell", {"command": "sleep 5"}, "")] * 6)
    assert stop_at(h) == 5


def test_a_read_that_keeps_finding_nothing_is_not_an_acknowledgement() -> None:
    steps = [("web_search", {"query": q}, {"results": [], "query": q}) for q in QUERIES]
    h = run(steps)
    assert not any(j.neutral for j in h.judgements) and h.kind("no_progress")


# ---- more look-alikes that are work ----------------------------------------------------------------

def test_negative_control_crawling_pages_that_share_their_navigation_is_quiet() -> None:
    nav = ["Home", "Docs", "Blog", "Pricing", "Contact us", "(c) 2026 Example Inc.", "Privacy", "Terms"]
    steps = [("fetch_page", {"url": f"https://example.org/docs/page-{p}"},
              "\n".join(nav[:4] + [f"Page {p}: how feature {p} works", f"Step {p}.1 do this"] + nav[4:]))
             for p in range(12)]
    assert loud(run(steps)) == []


def test_negative_control_research_with_overlapping_results_is_quiet() -> None:
    steps = [("web_search", {"query": q}, hits(0, range(3 * i, 3 * i + 6))) for i, q in enumerate(QUERIES)]
    assert loud(run(steps)) == []  # each query brings three new pages beside three seen ones


def test_negative_control_a_declared_poller_whose_status_text_only_ages_is_left_to_its_budget() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"job_status": {
        "exempt_repeat": True, "poll": {"max_polls": 20}, "progress": {"state_field": "state",
                                                                       "terminal_states": ["done"]}}}}
    steps = [("job_status", {"job": "j1"}, {"state": "running", "note": f"elapsed {5 * i}s"}) for i in range(8)]
    steps.append(("job_status", {"job": "j1"}, {"state": "done", "note": "elapsed 45s"}))
    assert loud(run(steps, pol)) == []


def test_negative_control_running_tests_file_by_file_with_the_same_summary_is_no_repeat() -> None:
    """Batch work whose answers look alike: one word of three differs (the file), below the
    default similarity, so no near-duplicate count; each file is its own action."""
    steps = [("run_tests", {"path": f"tests/test_{name}.py"}, "1 passed in 0.04s")
             for name in ("api", "cli", "db", "io", "ui", "net", "fs", "log")]
    assert run(steps).kind("repeat") == []
