"""Rules added on the public-report corpus's misses (issue 26): each is one plain sentence that
holds for agents in general, with its unit test, a negative control and a mutation check.

1. A number under a key that names a clock reading is volatile, inside text too.
2. How often the agent did something (`read 3×`) is a counter, not an answer.
3. A label made of one of the call's own words and a number is an echo with a counter.
4. A relevance score or rank says how the engine ranked a hit, not what the hit is.
5. The request quoted (in quotation marks) in its answer is an echo, and a line's list marker
   (`[2]`, `3.`) is its position, not its content.
6. A process's exit status line is no content of its answer (its failure is read apart).
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.calls import ToolCall
from otel_loopguard.canon import load_key
from otel_loopguard.canon.shape import FRAGMENT, noise, shape
from otel_loopguard.calls import RawCall
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
from otel_loopguard.policy import Policy

KEY = load_key(key=b"r" * 32)


def call(args: Any, result: Any, tool: str = "t") -> ToolCall:
    return fingerprint_call(RawCall(seq=1, tool=tool, arguments=args, result=result), Fingerprinter(KEY, Policy()))


# ---- 1. clock-keyed numbers -----------------------------------------------------------------

@pytest.mark.parametrize("text, masked", [
    ('{"status":"unhealthy","uptime_ms":428829,"db":"down"}', '{"status":"unhealthy","uptime_ms":\x00,"db":"down"}'),
    ('"duration_seconds":0.1}', '"duration_seconds":\x00}'),
    ("elapsed=1.25 rows=3", "elapsed=\x00 rows=3"),
    ("Took: 35", "Took: \x00"),
    ("latency_ms: 89,965 ok", "latency_ms: \x00 ok"),
    # What the call consumed is no answer either (the tokens it used: issue 26, corpus case 023).
    ("(tokens: 9 · duration: 4m 8s)", "(tokens: \x00 · duration: \x00m \x00)"),
    ("subagent_tokens: 89,965 · tool_uses: 25", "subagent_tokens: \x00 · tool_uses: 25"),
    ('{"input_tokens":812,"output_tokens":40}', '{"input_tokens":\x00,"output_tokens":\x00}'),
])
def test_a_number_under_a_clock_key_is_masked_inside_text(text: str, masked: str) -> None:
    assert noise(text) == masked.replace("\x00", FRAGMENT)


@pytest.mark.parametrize("kept", ["timeout=30", "rows: 3", "uptime check passed", "duration of the lease is fixed",
                                  '{"count":12,"limit":50}', "max_duration_ms", "took_over=1",
                                  "3 tokens left", "tokenset: 4"])
def test_negative_control_numbers_under_other_keys_and_clock_words_without_a_number_stay(kept: str) -> None:
    assert noise(kept) == kept, kept


def test_mutation_an_answer_that_changes_beside_the_clock_reading_is_a_new_shape() -> None:
    a = call({"c": "curl /healthz"}, 'HTTP/1.1 503\r\n{"status":"unhealthy","uptime_ms":428829}')
    b = call({"c": "curl /healthz"}, 'HTTP/1.1 503\r\n{"status":"unhealthy","uptime_ms":439952}')
    c = call({"c": "curl /healthz"}, 'HTTP/1.1 200\r\n{"status":"healthy","uptime_ms":451020}')
    assert a.equivalence.shape == b.equivalence.shape and a.result != b.result
    assert c.equivalence.shape != a.equivalence.shape


# ---- 2. repetition counts -------------------------------------------------------------------

def test_a_repetition_count_is_masked() -> None:
    assert noise("(7/7 lines shown · read 3× this session)") == f"(7/7 lines shown · read {FRAGMENT} this session)"
    assert noise("seen 12 × so far") == f"seen {FRAGMENT} so far"


@pytest.mark.parametrize("kept", ["1920×1080", "3 × 4 = 12", "x3×", "12×4"])
def test_negative_control_dimensions_and_products_are_kept(kept: str) -> None:
    assert noise(kept) == kept and shape(kept) == kept


# ---- 3. an echo with a counter --------------------------------------------------------------

def test_a_label_of_the_calls_own_word_and_a_number_is_an_echo() -> None:
    eq = call({"command": "bash", "args": ["-c", "echo noop"]},
              {"stdout": "noop\n", "exit_code": 0, "label": "noop131", "duration_ms": 4}).equivalence
    assert eq.ack and eq.item_count == 0 and eq.echoed == 2


def test_negative_control_a_counted_label_of_another_word_is_content() -> None:
    eq = call({"command": "bash", "args": ["-c", "echo noop"]},
              {"stdout": "noop\n", "exit_code": 0, "label": "build131"}).equivalence
    assert not eq.ack and eq.item_count == 1


def test_mutation_the_word_alone_must_match_a_whole_argument_word() -> None:
    # "noo" is inside "noop" but is no word of the arguments: not an echo.
    eq = call({"command": "echo noop"}, {"label": "noo131"}).equivalence
    assert eq.item_count == 1 and eq.echoed == 0
    assert call({"command": "echo noop"}, {"label": "noop-7"}).equivalence.echoed == 1


# ---- 4. a relevance score is no content -----------------------------------------------------

def kb(ids: list[str], scores: list[float]) -> dict[str, Any]:
    return {"results": [{"id": i, "title": f"Article {i}", "score": s} for i, s in zip(ids, scores)]}


def test_the_same_hits_rescored_and_reranked_have_the_same_items() -> None:
    a = call({"query": "user cannot log in after 2FA reset"}, kb(["KB-1", "KB-2", "KB-3"], [0.88, 0.8, 0.7]))
    b = call({"query": "login fails after two factor reset"}, kb(["KB-3", "KB-1", "KB-2"], [0.91, 0.77, 0.52]))
    assert set(a.equivalence.item_hashes) == set(b.equivalence.item_hashes)


def test_negative_control_a_hit_whose_other_fields_change_is_a_new_item() -> None:
    a = call({"q": "tasks"}, {"tasks": [{"id": "T1", "status": "open", "rank": 1}]})
    b = call({"q": "tasks"}, {"tasks": [{"id": "T1", "status": "done", "rank": 1}]})
    assert set(a.equivalence.item_hashes) != set(b.equivalence.item_hashes)


def test_mutation_a_score_under_a_key_that_names_no_rank_is_content() -> None:
    a = call({"q": "x"}, {"results": [{"id": "KB-1", "votes": 3}]})
    b = call({"q": "x"}, {"results": [{"id": "KB-1", "votes": 4}]})
    assert set(a.equivalence.item_hashes) != set(b.equivalence.item_hashes)


# ---- 5. the request quoted in its answer; a list marker is a position -----------------------

def web(query: str, sources: list[str]) -> dict[str, Any]:
    listed = "\n".join(f"[{n}] {s}" for n, s in enumerate(sources, 1))
    return {"llmContent": f'Web search results for "{query}":\n\nNo specification found.\n\nSources:\n{listed}',
            "returnDisplay": f'Search results for "{query}" returned.'}


def test_a_quoted_query_and_renumbered_sources_bring_the_same_items() -> None:
    a = call({"query": "etf_code.mst file format"}, web("etf_code.mst file format", ["KIS portal (https://a)", "repo (https://b)"]))
    b = call({"query": "etf_code.mst layout spec"}, web("etf_code.mst layout spec", ["repo (https://b)", "KIS portal (https://a)"]))
    assert set(a.equivalence.item_hashes) == set(b.equivalence.item_hashes)


def test_negative_control_a_new_source_is_a_new_item() -> None:
    a = call({"query": "etf_code.mst file format"}, web("etf_code.mst file format", ["KIS portal (https://a)"]))
    b = call({"query": "etf_code.mst layout spec"}, web("etf_code.mst layout spec", ["KIS forum (https://c)"]))
    assert set(a.equivalence.item_hashes) != set(b.equivalence.item_hashes)


def test_negative_control_an_unquoted_path_in_an_acknowledgement_is_kept() -> None:
    # "Edited src/a.py" is a new side effect's answer, not a quote of the request.
    a = call({"path": "src/search/oauth.ts"}, "Edited src/search/oauth.ts\nline 2")
    b = call({"path": "src/search/client.ts"}, "Edited src/search/client.ts\nline 2")
    assert set(a.equivalence.item_hashes) != set(b.equivalence.item_hashes)


def test_mutation_line_numbers_of_a_file_read_are_not_list_markers() -> None:
    # `12: x` (a reader's line numbers) stays: only `[n]`, `n.` and `n)` are markers.
    a = call({"p": "f"}, "1: import os\n2: import sys")
    b = call({"p": "f"}, "11: import os\n12: import sys")
    assert set(a.equivalence.item_hashes) != set(b.equivalence.item_hashes)
    c = call({"p": "f"}, "1. import os\n2. import sys")
    d = call({"p": "f"}, "2. import os\n1. import sys")
    assert set(c.equivalence.item_hashes) == set(d.equivalence.item_hashes)


# ---- 6. an exit status line is no content ---------------------------------------------------

def test_an_exit_status_line_is_no_content() -> None:
    for text in ("[Command finished with exit code 0]", "done\nExit code: 1", "returncode=127"):
        assert call({"c": "x"}, text).equivalence.ack, text


def test_negative_control_prose_about_exit_codes_is_content() -> None:
    eq = call({"c": "x"}, "The script returns exit code 0 when every check passes").equivalence
    assert eq.item_count == 1


def test_mutation_other_text_beside_the_status_line_is_still_content() -> None:
    eq = call({"c": "x"}, "> Task :core:classes\n[Command finished with exit code 0]").equivalence
    assert eq.item_count == 1 and not eq.ack
