"""The processor puts equivalence sketches on tool spans, never content (issue 26,
docs/equivalence.md): the names of docs/contract.md, sizes capped, and with redact=True
no payload fragment in anything exported; what it sends reads back to what it judged."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from otel_loopguard.conventions import attributes as conv
from otel_loopguard.conventions.sketches import MAX_WIRE_ITEMS, from_attributes

from .helpers import Stack, all_text, tags

HEX16 = re.compile(r"^[0-9a-f]{16}$")


def _tool(stack: Stack, tool: str, args: Any, result: Any) -> None:
    with stack.tracer.start_as_current_span(f"execute_tool {tool}") as span:
        span.set_attributes({
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": json.dumps(args),
            "gen_ai.tool.call.result": result if isinstance(result, str) else json.dumps(result),
        })


LOG = ("2026-12-06 06:40:{s:02d}.{ms:03d} [pid {pid}] attempt {n} of 5 failed after {t}ms: "
       "connection refused by db-primary-7 (scratch /tmp/tmpx{pid}q/run.log)\nSECRET-PAYLOAD-LINE {n}")
HITS = [{"url": f"https://docs.example.org/page-{i}", "title": f"SECRET title {i}", "snippet": "SECRET snippet"}
        for i in range(40)]


def test_a_tagged_span_carries_the_sketches_and_they_read_back(stacks: Callable[..., Stack]) -> None:
    stack = stacks()
    _tool(stack, "run_shell", {"cmd": "make build SECRET-ARG"}, {"exit_code": 2, "stdout": LOG.format(
        s=1, ms=5, pid=4711, n=1, t=120)})
    _tool(stack, "web_search", {"query": "SECRET query words here"}, HITS)
    shell, search = stack.tagged()
    t = tags(shell)
    assert t[conv.OUTCOME] == "error" and t[conv.RESULT_FAILURE] == "exit_code"  # the span itself said OK
    assert re.fullmatch(r"[0-9a-f]{32}", t[conv.RESULT_SHAPE_DIGEST]) and t[conv.RESULT_SHAPE_DIGEST] != t[
        conv.RESULT_DIGEST]
    assert re.fullmatch(r"[0-9a-f]{64}", t[conv.ARGS_SKETCH])
    s = tags(search)
    assert s[conv.RESULT_ITEM_COUNT] == 40 and s[conv.RESULT_ITEMS_LEVEL] >= 1  # sampled: more than the cap
    assert 0 < len(s[conv.RESULT_ITEMS]) <= MAX_WIRE_ITEMS and all(HEX16.match(h) for h in s[conv.RESULT_ITEMS])
    assert s[conv.OUTCOME] == "ok" and conv.RESULT_FAILURE not in s
    eq = from_attributes(search.attributes or {})
    assert eq is not None and eq.item_count == 40 and len(eq.item_hashes) == len(s[conv.RESULT_ITEMS])


def test_with_redaction_nothing_reversible_leaves_the_app(stacks: Callable[..., Stack]) -> None:
    stack = stacks(redact=True)
    for n in range(3):
        _tool(stack, "run_shell", {"cmd": "make build SECRET-ARG"}, {"exit_code": 2, "stdout": LOG.format(
            s=n, ms=7 * n, pid=4700 + n, n=n, t=100 + n)})
    _tool(stack, "web_search", {"query": "SECRET query words here"}, HITS)
    # A long text answer gets a result sketch; a shell no-op a flag: neither says what was said.
    _tool(stack, "researcher", {"input": "SECRET task"}, "Second time asking. SECRET-REFUSAL: my charter is "
          "the merged pull request, and the backlog is outside it; nothing was changed here.")
    _tool(stack, "run_shell", {"cmd": "echo 'SECRET-ECHO done'"}, "SECRET-ECHO done")
    exported = all_text(stack.spans())
    assert conv.RESULT_ITEMS in exported and conv.ARGS_SKETCH in exported
    assert conv.RESULT_SKETCH in exported and conv.ARGS_NOOP in exported
    for needle in ("SECRET", "db-primary", "connection refused", "docs.example.org", "make build", "/tmp/",
                   "charter", "backlog", "asking", "echo '"):
        assert needle not in exported, needle


def test_the_same_failure_with_fresh_noise_has_one_shape_and_is_judged_a_loop(
        stacks: Callable[..., Stack]) -> None:
    """Three identical failures but for their clock, pid, attempt and temp path: one shape
    digest, three exact digests; the processor's own detectors judged them a repeat."""
    stack = stacks()
    with stack.tracer.start_as_current_span("agent"):  # one trace: one run
        for n in range(5):
            _tool(stack, "run_shell", {"cmd": "make build"}, LOG.format(s=n, ms=9 * n, pid=4700 + n, n=1, t=100 + n)
                  .replace("SECRET-PAYLOAD-LINE 1", "Exit code: 2"))
    spans = stack.tagged()
    shapes = {tags(s).get(conv.RESULT_SHAPE_DIGEST) for s in spans}
    exact = {tags(s)[conv.RESULT_DIGEST] for s in spans}
    assert len(shapes) == 1 and None not in shapes and len(exact) == 5
    assert all(tags(s)[conv.OUTCOME] == "error" for s in spans)  # "Exit code: 2" in the text
    kinds = {e.attributes["loopguard.finding.kind"] for s in spans for e in s.events  # type: ignore[index]
             if e.name == "loopguard.decision"}
    assert {"error_streak", "repeat"} <= kinds
