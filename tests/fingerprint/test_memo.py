"""The Fingerprinter's memo of recent small payloads changes speed, never a digest."""

from __future__ import annotations

import json
import threading

from otel_loopguard.calls import RawCall
from otel_loopguard.canon import DigestKey
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
from otel_loopguard.fingerprint import fingerprinter as fpmod
from otel_loopguard.policy import policy_from_mapping

KEY = DigestKey(b"memo-test-key-0123456789abcdef", "test")
POLICY = policy_from_mapping(
    {
        "tools": {
            "get_status": {"result_volatile_fields": ["etag"]},
            "raw_status": {"result_volatile_fields": []},
            "search": {"ignore_fields": ["debug"]},
            "lookup": {"identity_fields": ["tenant"]},
            "poll_job": {"progress": {"state_field": "state", "terminal_states": ["done"]}},
        }
    }
)


def _call(fp: Fingerprinter, tool: str, args: str, result: str, seq: int = 1, **extra: object) -> object:
    return fingerprint_call(RawCall(seq=seq, tool=tool, arguments=args, result=result, ok=True, **extra), fp)  # type: ignore[arg-type]


def _fresh_digests(tool: str, args: str, result: str) -> tuple[str, str]:
    """What a Fingerprinter that has never seen these payloads computes."""
    fp = Fingerprinter(KEY, POLICY)
    rule = POLICY.rule(tool)
    return fp.action_parts(tool, rule, args)[0], fp.result_parts(tool, rule, result)[0]


def test_a_remembered_digest_equals_a_fresh_one() -> None:
    fp = Fingerprinter(KEY, POLICY)
    args, result = '{"q": "x", "debug": 1}', '{"status": "ok", "etag": "e1"}'
    first = _call(fp, "search", args, result)
    again = _call(fp, "search", args, result, seq=2)
    assert (first.action, first.result) == (again.action, again.result) == _fresh_digests("search", args, result)
    assert (("search", args) in fp._actions) and (("search", result) in fp._results)  # the second came from the memo


def test_the_tool_is_part_of_the_memo_key() -> None:
    """Same text, different tools: a different action, and different volatile fields."""
    fp = Fingerprinter(KEY, POLICY)
    args, result = '{"id": 1}', '{"status": "ok", "etag": "e1"}'
    a = _call(fp, "get_status", args, result)
    b = _call(fp, "raw_status", args, result)
    assert a.action != b.action
    # get_status drops etag, raw_status keeps it: the memo must not hand one the other's digest
    assert a.result == _call(fp, "get_status", args, '{"status": "ok", "etag": "e2"}', seq=2).result
    assert b.result != _call(fp, "raw_status", args, '{"status": "ok", "etag": "e2"}', seq=2).result


def test_identity_values_are_never_served_from_the_memo() -> None:
    fp = Fingerprinter(KEY, POLICY)
    args = '{"order": 7}'
    one = fp.action_digest("lookup", POLICY.rule("lookup"), args, {"tenant": "a"})
    two = fp.action_digest("lookup", POLICY.rule("lookup"), args, {"tenant": "b"})
    assert one != two
    assert not fp._actions


def test_progress_rules_still_read_the_parsed_result() -> None:
    fp = Fingerprinter(KEY, POLICY)
    first = _call(fp, "poll_job", '{"job": 1}', '{"state": "running"}')
    second = _call(fp, "poll_job", '{"job": 1}', '{"state": "done"}', seq=2)
    assert first.evidence.state == "running" and second.evidence.state == "done"
    assert second.evidence.terminal


def test_the_memo_is_bounded_and_large_payloads_are_not_kept() -> None:
    fp = Fingerprinter(KEY, POLICY)
    rule = POLICY.rule("t")
    for i in range(fpmod.MEMO_ENTRIES + 10):
        fp.action_digest("t", rule, json.dumps({"i": i}))
    assert 0 < len(fp._actions) <= fpmod.MEMO_ENTRIES
    big = json.dumps({"blob": "x" * fpmod.MEMO_MAX_CHARS})
    before = len(fp._actions)
    digest = fp.action_digest("t", rule, big)
    assert len(fp._actions) == before
    assert digest == Fingerprinter(KEY, POLICY).action_parts("t", rule, big)[:2]


def test_threads_sharing_a_fingerprinter_get_the_digests_one_thread_gets() -> None:
    payloads = [json.dumps({"i": i % 300}) for i in range(3000)]
    rule = POLICY.rule("t")
    expected = [Fingerprinter(KEY, POLICY).action_digest("t", rule, p) for p in payloads]
    shared = Fingerprinter(KEY, POLICY)
    results: list[list[tuple[str, frozenset[str]]]] = [[] for _ in range(4)]

    def work(out: list[tuple[str, frozenset[str]]]) -> None:
        out.extend(shared.action_digest("t", rule, p) for p in payloads)

    threads = [threading.Thread(target=work, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results)


def test_tool_names_of_any_length_are_digested_but_long_ones_never_cached() -> None:
    """Tool names come from telemetry: the caches are bounded by entry count, so a sender's
    megabyte-long names must not be what fills them."""
    fp = Fingerprinter(KEY, POLICY)
    long_tool = "t" * (fpmod.MAX_CACHED_TOOL_CHARS + 1)
    first = _call(fp, long_tool, '{"a": 1}', '{"ok": true}')
    again = _call(fp, long_tool, '{"a": 1}', '{"ok": true}', seq=2)
    assert (first.action, first.result) == (again.action, again.result) == _fresh_digests(long_tool, '{"a": 1}', '{"ok": true}')
    assert not fp._actions and not fp._results
    assert all(tool != long_tool for _, tool in fp._prefixes)
    assert first.action != _call(fp, long_tool[:-1], '{"a": 1}', '{"ok": true}').action  # the name still counts


def test_prose_results_are_kept_but_text_a_decode_refused_is_not() -> None:
    """Prose ("order A-1: pending") is opaque whatever the stack: kept and served with its
    flag. Text that begins like JSON but fails to decode may have failed for lack of stack:
    computed afresh every time."""
    fp = Fingerprinter(KEY, POLICY)
    rule = POLICY.rule("get_status")
    prose, broken = "order A-1: pending", '{"status": "ok"'
    first = fp.result_digest("get_status", rule, prose)
    assert first == fp.result_parts("get_status", rule, prose)[:2] and "opaque_text" in first[1]
    assert ("get_status", prose) in fp._results  # noqa: SLF001
    assert fp.result_digest("get_status", rule, prose) == first
    fp.result_digest("get_status", rule, broken)
    assert ("get_status", broken) not in fp._results  # noqa: SLF001
