"""Equivalence sketches (docs/equivalence.md): shape form, items, argument sketch, echoes,
reported failures. Pure and fast; the detectors' use of them is tested in tests/detect."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from otel_loopguard.calls import RawCall, ToolCall
from otel_loopguard.canon import load_key
from otel_loopguard.canon import rust
from otel_loopguard.canon.shape import FRAGMENT, MAX_MASKED_CHARS, noise, shape
from otel_loopguard.canon.sketch import SLOTS, from_hex, similarity, sketch, slots, to_hex, tokens
from otel_loopguard.conventions.failures import failure
from otel_loopguard.conventions.sketches import from_attributes, to_attributes
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
from otel_loopguard.calls import Equivalence
from otel_loopguard.fingerprint.equivalence import ITEM_BITS, ITEM_CAP, Keyed, hashed_items, sample_level
from otel_loopguard.policy import Policy, policy_from_mapping
from otel_loopguard.progress import seen_equivalence

KEY = load_key(key=b"e" * 32)
OTHER_KEY = load_key(key=b"f" * 32)


def call(args: Any, result: Any, tool: str = "t", policy: Policy = Policy(), key: Any = KEY, **raw: Any) -> ToolCall:
    fp = Fingerprinter(key, policy)
    enc = (lambda v: v if isinstance(v, str) or v is None else json.dumps(v))
    return fingerprint_call(RawCall(seq=1, tool=tool, arguments=enc(args), result=enc(result), **raw), fp)


# ---- shape form ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("noisy", [
    "2026-12-06T06:40:12.123Z", "2026-12-06 06:40:12,5 UTC", "06:40:12", "at 6:40:12.5", "took 120ms", "in 1.25s",
    "after 3 seconds", "4 min", "1764637323", "1764637323123", "pid 4711", "PID=99", "attempt 3", "retry #2",
    "try 2 of 5", "round 4/10", "/tmp/tmpa8f3k2/out.log", "/var/folders/x1/T/abc", "0x7ffe12ab",
])
def test_noise_masks_each_volatile_fragment_inside_text(noisy: str) -> None:
    assert FRAGMENT in noise(f"before {noisy} after")
    assert noise(f"before {noisy} after").startswith("before ") and noise(f"before {noisy} after").endswith(" after")


@pytest.mark.parametrize("kept", [
    "due 2026-12-06", "3 failed, 2 passed", "order A-1234", "commit 3f2a1b9", "v2.5s", "abc123ms", "line 42",
    "HTTP 404", "port 8080", "version 1.2.3",
])
def test_business_data_and_counts_are_never_masked(kept: str) -> None:
    assert noise(kept) == kept and shape(kept) == kept


def test_ids_are_kept_in_noise_form_and_masked_in_shape_form() -> None:
    text = "request 123e4567-e89b-12d3-a456-426614174000 container a1b2c3d4e5f6a7b8c9"
    assert noise(text) == text
    assert shape(text) == f"request {FRAGMENT} container {FRAGMENT}"


def test_masking_a_text_equals_masking_each_of_its_lines() -> None:
    """Items are lines: no pattern may cross a line break (canon/shape.py)."""
    rng = random.Random(7)
    parts = ["12:00:01", "pid", "4711", "attempt", "3", "120", "ms", "2026-12-06", "x", "\n", " ", "/tmp/a", "s"]
    for _ in range(300):
        text = "".join(rng.choice(parts) + rng.choice(["", " ", "\n"]) for _ in range(12))
        assert noise(text).split("\n") == [noise(line) for line in text.split("\n")]


def test_masking_stops_after_its_bound_at_a_line_break() -> None:
    text = ("took 5ms\n" * (MAX_MASKED_CHARS // 9 + 50))
    masked = noise(text)
    assert masked.startswith(f"took {FRAGMENT}\n") and masked.endswith("took 5ms\n")


def test_a_long_texts_items_come_from_its_masked_head_only() -> None:
    """Past the masking bound a line keeps its clock reading: taken as an item it would look
    new every time, so it is left out."""
    lines = [f"06:40:{k % 60:02d} step {k} ok" for k in range(MAX_MASKED_CHARS // 10)]
    a = call({"cmd": "tail log"}, "\n".join(lines)).equivalence
    later = [f"07:10:{k % 60:02d} step {k} ok" for k in range(MAX_MASKED_CHARS // 10)]
    b = call({"cmd": "tail log"}, "\n".join(later)).equivalence
    assert 0 < a.item_count < len(lines) and a.items == b.items


def test_a_result_differing_only_in_noise_has_one_shape_digest_and_two_exact_digests() -> None:
    a = call({"cmd": "make"}, "06:40:12 build failed after 120ms (pid 4711)")
    b = call({"cmd": "make"}, "06:41:59 build failed after 131ms (pid 4788)")
    c = call({"cmd": "make"}, "06:41:59 build failed after 131ms (pid 4788): missing header")
    assert a.result != b.result and a.equivalence.shape == b.equivalence.shape != c.equivalence.shape


def test_arguments_are_never_shape_masked() -> None:
    """An action's identity keeps its values: a time or an id in the arguments is the request."""
    a = call({"at": "2026-12-06T06:40:12Z", "order": "123e4567-e89b-12d3-a456-426614174000"}, "ok")
    b = call({"at": "2026-12-06T06:41:12Z", "order": "123e4567-e89b-12d3-a456-426614174000"}, "ok")
    assert a.action != b.action


def test_a_tool_with_meaningful_fields_or_no_volatile_values_has_no_shape_digest() -> None:
    text = "created 123e4567-e89b-12d3-a456-426614174000 at 06:40:12"
    assert call({}, {"msg": text}).equivalence.shape is not None
    pol = policy_from_mapping({"tools": {"t": {"meaningful_fields": ["id"]}}})
    assert call({}, {"msg": text}, policy=pol).equivalence.shape is None
    pol = policy_from_mapping({"tools": {"t": {"volatile_values": False}}})
    assert call({}, {"msg": text}, policy=pol).equivalence.shape is None
    pol = policy_from_mapping({"equivalence": {"shape": False}})
    c = call({}, {"msg": text}, policy=pol)  # a judging switch: computed, then not looked at
    assert c.equivalence.shape is not None and seen_equivalence(c, pol, pol.rule("t")).shape is None


def test_judging_switches_hide_what_they_turn_off() -> None:
    for switch in ("items", "echo"):
        pol = policy_from_mapping({"equivalence": {switch: False}})
        c = call({"command": "echo hello there"}, "hello there", policy=pol)
        seen = seen_equivalence(c, pol, pol.rule("t"))
        assert c.equivalence.ack and not seen.ack, switch  # no items known, or the echo is content again


# ---- items -----------------------------------------------------------------------------------------------

HITS = [{"url": f"https://e.org/{i}", "title": f"T{i}", "snippet": f"{i + 2} days ago"} for i in range(8)]


def test_items_do_not_depend_on_order_and_a_subset_has_a_subset_of_the_items() -> None:
    whole = call({"q": "a"}, HITS).equivalence
    shuffled = HITS[:]
    random.Random(3).shuffle(shuffled)
    assert call({"q": "b"}, shuffled).equivalence.items == whole.items and whole.item_count == 8
    assert set(call({"q": "c"}, HITS[2:6]).equivalence.item_hashes) < set(whole.item_hashes)


def test_a_search_hit_is_its_address_and_a_record_without_one_is_its_whole_content() -> None:
    resnippeted = [{**h, "snippet": "new words"} for h in HITS]
    assert call({}, resnippeted).equivalence.items == call({}, HITS).equivalence.items
    records = [{"id": i, "status": "running"} for i in range(3)]
    done = [{"id": i, "status": "done"} for i in range(3)]
    assert set(call({}, records).equivalence.item_hashes).isdisjoint(call({}, done).equivalence.item_hashes)
    pol = policy_from_mapping({"tools": {"t": {"equivalence": {"item_fields": ["id"]}}}})
    assert call({}, records, policy=pol).equivalence.items == call({}, done, policy=pol).equivalence.items


def test_lines_of_text_are_items_in_noise_form() -> None:
    a = call({}, "06:00:01 alpha\n06:00:02 beta\n\n").equivalence
    b = call({}, "beta at 07:00:00\n07:00:01 alpha").equivalence
    assert a.item_count == 2 and len(set(a.item_hashes) & set(b.item_hashes)) == 1  # "<t> alpha" is in both


def test_an_object_brings_its_lists_its_lines_and_one_item_for_the_rest() -> None:
    eq = call({}, {"status": "ok", "count": 3, "rows": [{"a": 1}, {"a": 2}], "log": "x\ny"}).equivalence
    assert eq.item_count == 2 + 2 + 1  # two rows, two lines, {"count": 3}


def test_acknowledgements_and_echoes_bring_no_content() -> None:
    for result in ("", None, "OK", {"success": True}, {"ok": True, "path": "src/a.py"}, "Done.\n"):
        eq = call({"path": "src/a.py"}, result).equivalence
        assert eq.ack and eq.item_count == 0, result
    echo = call({"command": "echo 'waiting for the server'"}, "waiting for the server").equivalence
    assert echo.echoed == 1 and echo.ack
    found_nothing = call({"query": "abc def"}, {"results": [], "query": "abc def"}).equivalence
    assert found_nothing.empty_list and not found_nothing.ack and found_nothing.echoed == 1


def test_numbers_and_short_strings_are_never_echoes() -> None:
    eq = call({"page": 2, "id": "A1"}, {"page": 2, "id": "A1", "total": 40}).equivalence
    assert eq.echoed == 0 and eq.item_count == 1


def test_items_are_keyed() -> None:
    assert set(call({}, HITS).equivalence.item_hashes).isdisjoint(
        call({}, HITS, key=OTHER_KEY).equivalence.item_hashes)


def test_sampling_keeps_at_most_the_cap_and_a_subsets_sample_agrees_at_the_wholes_level() -> None:
    keyed = Keyed(KEY)
    whole_texts = [f"line {k}: some content {k * 7}" for k in range(500)]
    whole, count, level = hashed_items(whole_texts, keyed)
    kept = Equivalence(items=whole, item_count=count, level=level).item_hashes
    assert count == 500 and len(kept) <= ITEM_CAP and level > 0 and list(kept) == sorted(kept)
    assert all(ITEM_BITS - h.bit_length() >= level for h in kept)  # an item's level shows on the wire
    part_texts = random.Random(11).sample(whole_texts, 120)
    part, part_count, part_level = hashed_items(part_texts, keyed)
    part_kept = Equivalence(items=part, item_count=part_count, level=part_level).item_hashes
    assert part_level <= level
    at_level = {h for h in part_kept if ITEM_BITS - h.bit_length() >= level}
    assert at_level <= set(kept)  # what a subset shows at the whole's level, the whole showed
    assert hashed_items(list(reversed(whole_texts)), keyed)[0] == whole  # order does not matter


def test_the_sampling_level_is_the_smallest_that_keeps_the_cap() -> None:
    assert sample_level([0] * ITEM_CAP) == 0
    zeros = [0] * 100 + [1] * 40 + [2] * 20 + [3] * 5
    level = sample_level(zeros)
    assert sum(z >= level for z in zeros) <= ITEM_CAP < sum(z >= level - 1 for z in zeros)


def test_a_long_result_is_sampled_on_the_wire_size() -> None:
    eq = call({}, [{"url": f"u{i}"} for i in range(300)]).equivalence
    assert eq.item_count == 300 and 0 < len(eq.item_hashes) <= ITEM_CAP and eq.level >= 1
    assert len(eq.items) == 8 * len(eq.item_hashes)  # 8 bytes an item: a held call stays small


# ---- the argument sketch ------------------------------------------------------------------------------

def test_a_sketch_estimates_how_alike_two_requests_are() -> None:
    keyed = Keyed(KEY)
    s = lambda text: sketch(tokens({"q": text}), keyed.token)  # noqa: E731
    same = s("python asyncio timeout error fix")
    assert similarity(same, s("fix python asyncio timeout error")) == 1.0  # reordered: the same words
    assert similarity(same, s("python asyncio timeout error fix example")) >= 0.6
    assert similarity(same, s("weather in paris tomorrow")) < 0.2
    assert same is not None and len(slots(same)) == SLOTS and len(same) == 2 * SLOTS
    assert from_hex(to_hex(same)) == same and len(to_hex(same)) == 64


def test_tokens_keep_ids_as_they_are_and_lower_words() -> None:
    assert tokens({"q": "Python A12 python", "n": 3, "k": True}) == {"python", "A12", "3"}


def test_sketches_are_keyed_and_salted_by_declared_identity() -> None:
    a = call({"q": "list the records"}, "x").equivalence.sketch
    assert similarity(a, call({"q": "list the records"}, "x", key=OTHER_KEY).equivalence.sketch) < 0.5
    pol = policy_from_mapping({"tools": {"t": {"identity_fields": ["tenant"]}}})
    acme = call({"q": "list the records"}, "x", policy=pol, identity={"tenant": "acme"}).equivalence.sketch
    globex = call({"q": "list the records"}, "x", policy=pol, identity={"tenant": "globex"}).equivalence.sketch
    assert similarity(acme, globex) < 0.5
    assert similarity(acme, call({"q": "list the records"}, "y", policy=pol,
                                 identity={"tenant": "acme"}).equivalence.sketch) == 1.0


def test_sketch_fields_limit_what_the_sketch_reads() -> None:
    pol = policy_from_mapping({"tools": {"t": {"equivalence": {"sketch_fields": ["query"]}}}})
    a = call({"query": "asyncio timeout", "session": "s-1 aa bb cc"}, "x", policy=pol).equivalence.sketch
    b = call({"query": "asyncio timeout", "session": "s-2 dd ee ff"}, "x", policy=pol).equivalence.sketch
    assert similarity(a, b) == 1.0


# ---- failures the result reports -------------------------------------------------------------------------

FIELDS = Policy().equivalence.failure_fields


@pytest.mark.parametrize("value,expected", [
    ({"exit_code": 1}, "exit_code"), ({"exit_code": 0}, None), ({"returncode": "2"}, "returncode"),
    ({"isError": True}, "isError"), ({"isError": False}, None), ({"success": False}, "success"),
    ({"success": True}, None), ({"error": "denied"}, "error"), ({"error": None}, None), ({"error": ""}, None),
    ({"errors": ["x"]}, None),  # a validation tool's content, not its outcome
])
def test_failure_fields_by_convention(value: dict[str, Any], expected: Any) -> None:
    assert failure(value, "json", FIELDS, True) == expected


@pytest.mark.parametrize("text,fails", [
    ("make: *** Error 2\nCommand exited with code 2", True), ("exit status 1", True), ("returncode=127", True),
    ("Exit code: 0", False), ("all good", False), ("the exit code of a process is a number", False),
    ("[Process exited with code 1]", True), ("Error: command failed, exit code 1", True),
    ("In bash, a script that fails returns exit code 1 to its caller by convention.", False),
    ("See https://example.org: exit status 1 means a general error in most shells, and 2 misuse.", False),
])
def test_failure_in_text_at_its_head_or_tail(text: str, fails: bool) -> None:
    assert (failure(text, "text", FIELDS, True) == "text") is fails


def test_a_reported_failure_makes_the_call_fail_whatever_its_span_said() -> None:
    assert call({}, {"exit_code": 2, "stdout": ""}).ok is False
    assert call({}, {"exit_code": 0, "stdout": ""}).ok is True
    pol = policy_from_mapping({"equivalence": {"failure_fields": ["status_error"]}})
    assert call({}, {"exit_code": 2}, policy=pol).ok is True and call({}, {"status_error": "x"}, policy=pol).ok is False


def test_an_exempt_tool_is_judged_on_exact_digests_only() -> None:
    pol = policy_from_mapping({"equivalence": {"exempt_tools": ["t"]}})
    c = call({"q": "x"}, {"exit_code": 2, "log": "06:00:00 x"}, policy=pol)
    assert c.ok is True and c.equivalence.sketch is None and c.equivalence.item_count is None


# ---- on the wire, and the same on every path ----------------------------------------------------------

def test_sketch_attributes_read_back_to_the_same_equivalence() -> None:
    for result in (HITS, "a\nb", "", {"exit_code": 1, "log": "06:00:00 boom"}, [{"url": f"u{i}"} for i in range(90)]):
        eq = call({"q": "some words here"}, result).equivalence
        assert from_attributes(to_attributes(eq)) == eq


def test_a_shell_noop_travels_as_one_boolean() -> None:
    eq = call({"command": "cd /srv && true"}, "").equivalence
    attrs = to_attributes(eq)
    assert eq.noop and attrs["loopguard.args.noop"] is True and from_attributes(attrs) == eq
    assert "loopguard.args.noop" not in to_attributes(call({"command": "make"}, "").equivalence)
    assert from_attributes({"loopguard.args.noop": "yes"}) is None  # only `true` is read
    assert from_attributes({"loopguard.args.noop": True}).noop  # alone, from a span without a result


def test_a_long_text_result_travels_as_a_fixed_size_sketch() -> None:
    long = "I'm declining: my charter is the merged request, the backlog is outside it. Nothing changed. " * 40
    eq = call({"q": "a b"}, long).equivalence
    attrs = to_attributes(eq)
    assert len(attrs["loopguard.result.sketch"]) == 128 and from_attributes(attrs) == eq  # whatever the length
    assert call({"q": "a b"}, long[:60]).equivalence.result_sketch is None  # too short to estimate from
    assert call({"q": "a b"}, {"text": long}).equivalence.result_sketch is None  # text results only
    assert from_attributes({"loopguard.result.sketch": "ab" * 32, "loopguard.result.item_count": 1}).result_sketch is None


def test_a_result_sketch_reads_a_bounded_head() -> None:
    from otel_loopguard.fingerprint.equivalence import MAX_SKETCH_CHARS
    head = " ".join(f"word{k}" for k in range(400))[:MAX_SKETCH_CHARS]
    a = call({"q": "x"}, head + "\n" + "tail one " * 500).equivalence.result_sketch
    b = call({"q": "x"}, head + "\n" + "another tail " * 500).equivalence.result_sketch
    assert a is not None and a == b  # beyond the head, a long read is its items' to judge


def test_malformed_attributes_are_ignored() -> None:
    eq = from_attributes({"loopguard.result.item_count": 2, "loopguard.result.items": ["zz", 3, "0" * 16],
                          "loopguard.args.sketch": "nothex"})
    assert eq is not None and eq.item_hashes == (0,) and eq.sketch is None
    assert from_attributes({"loopguard.tool.name": "t"}) is None


def test_a_precomputed_equivalence_is_used_as_it_came() -> None:
    eq = call({"q": "a b"}, "x\ny").equivalence
    fp = Fingerprinter(KEY, Policy())
    got = fingerprint_call(RawCall(seq=1, tool="t", args_digest="a" * 32, result_digest="b" * 32, equivalence=eq), fp)
    assert got.equivalence == eq


PAYLOADS = [
    ({"cmd": "make"}, "06:40:12 failed after 12ms\nline two"),
    ({"q": "asyncio timeout"}, json.dumps(HITS)),
    ({"path": "a.py"}, json.dumps({"exit_code": 1, "stdout": "pid 1 at 12:00:00\nE assert"})),
    ('{"path": "x"}', '{"messages": [], "messageId": "123e4567-e89b-12d3-a456-426614174000"}'),
    ({"k": "v"}, "not json { at 12:00:00"),
]


def test_the_native_and_the_python_paths_give_the_same_equivalence(monkeypatch: pytest.MonkeyPatch) -> None:
    native = [call(a, r) for a, r in PAYLOADS]
    monkeypatch.setattr(rust, "AVAILABLE", False)
    python = [call(a, r) for a, r in PAYLOADS]
    assert python == native


def test_small_payloads_are_memoised_per_rule_and_the_memo_stays_bounded() -> None:
    from otel_loopguard.fingerprint import fingerprinter

    pol = policy_from_mapping({"tools": {"search": {"equivalence": {"item_fields": []}}}})
    fp = Fingerprinter(KEY, pol)
    hits = json.dumps(HITS[:2])
    first = fingerprint_call(RawCall(seq=1, tool="t", arguments='{"q": "a"}', result=hits), fp).equivalence
    again = fingerprint_call(RawCall(seq=2, tool="t", arguments='{"q": "a"}', result=hits), fp).equivalence
    other_rule = fingerprint_call(RawCall(seq=3, tool="search", arguments='{"q": "a"}', result=hits), fp).equivalence
    assert again is first and other_rule != first  # another rule: its own items (whole elements)
    for n in range(fingerprinter.MEMO_ENTRIES + 10):
        fingerprint_call(RawCall(seq=n + 4, tool="t", arguments=f'{{"q": "{n}"}}', result="x"), fp)
    assert len(fp._equivalences) <= fingerprinter.MEMO_ENTRIES  # noqa: SLF001
