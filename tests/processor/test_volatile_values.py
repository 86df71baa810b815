"""The processor on results whose payload differs only in a fresh id and a fetch time (issue
14): `loopguard.result.digest` is the masked digest (equal across the loop's calls),
`loopguard.result.exact_digest` the unmasked one, and observe-only marks the loop."""

from __future__ import annotations

import json
import uuid

from .helpers import Stack, captured, decisions, emit, tags


def reader_result(i: int) -> str:
    return json.dumps({"messages": [], "messageId": str(uuid.UUID(int=i * 104729 + 7, version=4)),
                       "fetchedAt": f"2026-12-02T01:00:{i:02d}.000Z"})


def run(stack: Stack, results: list[str]) -> list:
    entry = captured("genai_tool")
    with stack.tracer.start_as_current_span("agent"):
        for result in results:
            attrs = dict(entry["attributes"], **{"gen_ai.tool.call.arguments": '{"channel": "ops"}',
                                                 "gen_ai.tool.call.result": result})
            emit(stack.tracer, entry, attributes=attrs)
    return stack.tool_spans()


def first_block(spans: list) -> int | None:
    blocked = [tags(s)["loopguard.seq"] for s in spans
               if any(d["loopguard.decision"] == "would_block" for d in decisions(s))]
    return blocked[0] if blocked else None


def test_the_reported_reader_loop_is_marked_by_call_8(stack: Stack) -> None:
    spans = run(stack, [reader_result(i) for i in range(8)])
    t = [tags(s) for s in spans]
    assert len({x["loopguard.result.digest"] for x in t}) == 1  # masked: one answer
    assert len({x["loopguard.result.exact_digest"] for x in t}) == 8  # the exact ones differ
    block = first_block(spans)
    assert block is not None and block <= 8


def test_results_with_nothing_volatile_carry_no_exact_digest_and_real_changes_are_no_loop(stack: Stack) -> None:
    results = [json.dumps({"messages": [{"text": f"message {i}"}], "state": f"s{i}"}) for i in range(8)]
    spans = run(stack, results)
    assert all("loopguard.result.exact_digest" not in tags(s) for s in spans)
    assert first_block(spans) is None
    assert all(not decisions(s) for s in spans)


def test_new_messages_with_fresh_ids_are_progress(stack: Stack) -> None:
    results = [json.dumps({"messages": [{"text": f"message {i}"}], "messageId": str(uuid.uuid4()),
                           "fetchedAt": f"2026-12-02T01:00:{i:02d}Z"}) for i in range(8)]
    spans = run(stack, results)
    assert len({tags(s)["loopguard.result.digest"] for s in spans}) == 8
    assert first_block(spans) is None
