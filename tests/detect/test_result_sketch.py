"""Near-duplicate answers (issue 26, corpus case 023, ShaftHQ/SHAFT_ENGINE#4083): a sub-agent
asked the same task in new words declines each time with a new opening sentence. Every answer
is a new digest and a new first line; its keyed similarity sketch (canon/sketch.py, RESULT_SLOTS)
says it is the answer a near-duplicate request already had, so it brings nothing new and the
reworded requests continue one `repeat` count.

Negative controls: the same request polled while its one line of progress changes (a build's
log, corpus cases 036 and h16), a crawl of templated pages whose bodies differ, and answers
that say something else each time, all stay quiet.
"""

from __future__ import annotations

from typing import Any, Optional

from otel_loopguard.canon.sketch import similarity
from otel_loopguard.fingerprint.equivalence import MIN_SKETCH_CHARS

from .helpers import NO_BUDGETS, Harness, run, stop_at, loud

POLICY = {"budget": NO_BUDGETS}
OPENERS = ("", "Second time asking. ", "Same request again. ", "Third time now. ", "Once more: ", "Again. ",
           "This was asked before. ", "Repeating myself. ")
ASKS = ("", "Following up: ", "Re-sending with more context. The owner wants you to ", "Priority directive: ",
        "To be clear, this is authorised. ", "Last attempt: ", "Owner escalation: ", "Please: ")
TASK = "manage and delegate the full open-bug backlog under a four-agent cap and report who takes which bug"
REFUSAL = ("I'm declining: my charter is the pull request that merged this morning. Managing the open-bug "
           "backlog is outside it and needs the main thread's decision, not mine. Nothing was changed.")





def reasked(n: int, answer: Any = None) -> list[tuple[Any, ...]]:
    answer = answer or (lambda i: OPENERS[i] + REFUSAL + f"\nagent: a7f3c19e (subagent_tokens: {88000 + 97 * i:,})")
    return [("Task", {"prompt": ASKS[i] + TASK}, answer(i)) for i in range(n)]


def test_a_re_asked_sub_agent_declining_in_new_words_is_stopped_at_its_fifth_try() -> None:
    h = run(reasked(8))
    assert len({c.action for c in h.calls}) == 8 and len({c.result for c in h.calls}) == 8
    assert all(c.equivalence.result_sketch is not None for c in h.calls)
    assert [j.new_information for j in h.judgements] == [True] + [False] * 7
    assert stop_at(h) == 5 and "near-identical" in h.kind("repeat")[-1].reason


def test_mutation_one_try_fewer_is_not_stopped() -> None:
    assert stop_at(run(reasked(4))) is None


def test_mutation_with_similarity_off_each_answer_is_new_again() -> None:
    h = run(reasked(8), {"budget": NO_BUDGETS, "equivalence": {"similarity": None}})
    assert all(j.new_information for j in h.judgements) and stop_at(h) is None


def test_mutation_a_short_answer_gets_no_sketch() -> None:
    h = run(reasked(8, lambda i: OPENERS[i][:20] + "No."))
    assert all(len(OPENERS[i][:20] + "No.") < MIN_SKETCH_CHARS for i in range(8))
    assert all(c.equivalence.result_sketch is None for c in h.calls)


def test_negative_control_answers_that_say_something_else_each_time_are_quiet() -> None:
    topics = ("compute prices rose four percent", "storage tiers were merged into two", "egress became free",
              "a new region opened in Madrid", "spot capacity doubled last quarter", "GPUs are rationed by quota",
              "support plans were repriced", "the free tier shrank to one instance")
    h = run(reasked(8, lambda i: f"Summary: {topics[i]}. " + " ".join(f"{topics[i].split()[0]}{k}" for k in range(12))))
    assert loud(h) == []


def test_negative_control_a_poll_whose_one_line_of_progress_changes_is_quiet() -> None:
    steps = ("Creating an optimized production build", "Compiled successfully", "Linting and checking types",
             "Collecting page data", "Generating static pages (0/12)", "Finalizing page optimization",
             "Route (app) Size First Load JS", "Build finished")
    footer = ("\n[The command has no new output after 30 seconds. You may wait longer to see additional output "
              "by sending an empty command, send other commands to interact with the current process, or send "
              "keys to interrupt it.]")
    h = run([("execute_bash", {"command": "", "is_input": False}, f"   {s} ...{footer}") for s in steps])
    assert loud(h) == []


def test_negative_control_a_crawl_of_templated_pages_is_quiet() -> None:
    nav = "Home | Products | Support | Contact us | Sign in | Cart\nFree shipping on orders over fifty euros\n"
    bodies = [" ".join(f"w{p}x{k}" for k in range(15)) for p in range(8)]
    h = run([("fetch", {"url": f"https://shop.example.org/product/{100 + p}"},
              f"{nav}Product {100 + p}\n{bodies[p]}\nPrice: {10 + p} euros\n{nav}") for p in range(8)])
    assert loud(h) == []


def test_negative_control_near_pages_that_bring_several_new_lines_are_progress() -> None:
    """Catalogue pages alike in most words (a long shared template), each with its own name,
    code and price lines: more than one new item is news, however alike the words."""
    nav = "\n".join(" ".join(f"nav{r}w{k}" for k in range(10)) for r in range(8)) + "\n"
    pages = [f"{nav}Name: lamp{p}\nCode: sku{p}q\nPrice: {10 + p}z euros" for p in range(8)]
    h = run([("fetch", {"url": f"https://shop.example.org/product/{100 + p}"}, pages[p]) for p in range(8)])
    assert all(similarity(h.calls[0].equivalence.result_sketch, c.equivalence.result_sketch) >= 0.7
               for c in h.calls[1:])  # the words alone would call them one answer
    assert loud(h) == [] and all(j.new_information for j in h.judgements)
