"""The fast paths of fingerprinting give exactly what the general paths give.

Digests are a public contract (CONTRACT.md): the shortcuts taken for speed (the
prepared HMAC states, canon/fast.py: orjson where it writes as the rules do, the
no-walk serialisation of freshly parsed text) must never change a byte of what the rules
in canon/canonical.py give.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

from otel_loopguard.canon import DigestKey
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.canon import canonical as canon
from otel_loopguard.canon import fast
from otel_loopguard.policy import Policy

PROPS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()  # NaN and infinities included: the encoders must agree on them too
    | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=5),
    max_leaves=16,
)
flat_objects = st.dictionaries(st.text(max_size=8), scalars, max_size=8)


# --- HMAC with prepared states ------------------------------------------------------


@pytest.mark.parametrize("length", [16, 32, 63, 64, 65, 200])
def test_digest_equals_hmac_sha256_for_every_key_length(length: int) -> None:
    secret = bytes(range(256))[:length] if length <= 256 else b"k" * length
    key = DigestKey(secret)
    for message in (b"", b"x", b"loopguard.v1\x00action", bytes(range(256)) * 9):
        assert key.digest(message) == hmac.digest(secret, message, "sha256")[:16].hex()


@PROPS
@given(secret=st.binary(min_size=16, max_size=150), message=st.binary(max_size=300))
def test_digest_equals_hmac_sha256_property(secret: bytes, message: bytes) -> None:
    assert DigestKey(secret).digest(message) == hmac.new(secret, message, hashlib.sha256).digest()[:16].hex()


def test_digests_do_not_disturb_each_other() -> None:
    key = DigestKey(b"0123456789abcdef0123")
    first = key.digest(b"a")
    key.digest(b"b" * 5000)
    assert key.digest(b"a") == first


# --- no-walk serialisation of parsed text vs the walk ------------------------------------


def _general(text: str, drop: frozenset[str] = frozenset(), max_depth: int = canon.DEFAULT_MAX_DEPTH) -> canon.Canonical:
    """The rules: parse, then the walk."""
    return canon.serialise(canon.parse(text), drop_keys=drop, max_depth=max_depth)


def _unwalked(text: str, drop: frozenset[str] = frozenset()) -> canon.Canonical:
    """fast.parse_and_serialise with orjson out of the way: the rules' parse, then no walk
    where nothing in the value needs one."""
    with mock.patch.object(fast, "_orjson_loads", None):
        _, form, out, flags = fast.parse_and_serialise(text, drop, canon.DEFAULT_MAX_BYTES, canon.DEFAULT_MAX_DEPTH)
    return canon.Canonical(form=form, text=out, flags=flags)


@PROPS
@given(flat_objects)
def test_flat_objects_fast_path_equals_walk(obj: dict[str, Any]) -> None:
    try:
        text = json.dumps(obj, allow_nan=True, ensure_ascii=False)
    except ValueError:
        return
    assert _unwalked(text) == _general(text)


@PROPS
@given(values, st.frozensets(st.sampled_from(["a", "timestamp", "id", ""]), max_size=3))
def test_fast_path_equals_walk_with_dropped_keys(value: Any, drop: frozenset[str]) -> None:
    try:
        text = json.dumps(value, allow_nan=True)
    except ValueError:
        return
    assert _unwalked(text, drop) == _general(text, drop)


def test_fast_path_equals_walk_on_odd_inputs() -> None:
    for text in ['{"a":1e999}', '{"a":NaN}', '{"a":1,"a":2}', '"{\\"b\\":1,\\"a\\":2}"', '[' * 70 + ']' * 70,
                 '{"timestamp":1,"x":{"timestamp":2}}', '{"\u00e9":"\u2028","\\u0000":"\\ud800"}', ' {"a": 1}']:
        for drop in (frozenset(), frozenset({"timestamp"})):
            assert _unwalked(text, drop) == _general(text, drop), text


def test_the_walk_free_writer_is_taken_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check: the tests above compare it with the walk only if it runs."""
    walked: list[Any] = []
    real = canon._walk
    monkeypatch.setattr(canon, "_walk", lambda *a: walked.append(a) or real(*a))
    assert _unwalked(' {"b": [1, 2.5e-7], "a": null}').text == '{"a":null,"b":[1,2.5e-07]}'
    assert walked == []
    _general('{"a": 1}')
    assert walked  # negative control: the rules walk


# --- whole fingerprints ---------------------------------------------------------------------


def test_fingerprints_from_text_equal_fingerprints_from_values() -> None:
    fp = Fingerprinter(DigestKey(b"fast-path-test-key-0123"), Policy())
    args = {"order_id": "A7", "include_items": True, "limit": 10, "price": 1.25}
    result = {"status": "delivered", "version": 7, "timestamp": "now"}
    assert fp.action("t", json.dumps(args)).digest == fp.action("t", args).digest
    assert fp.result("t", json.dumps(result)).digest == fp.result("t", result).digest


# --- parse and serialise in one step ----------------------------------------------------------


def _both(value: Any, drop: frozenset[str], max_bytes: int = canon.DEFAULT_MAX_BYTES,
          max_depth: int = canon.DEFAULT_MAX_DEPTH) -> None:
    parsed = canon.parse(value, max_bytes=max_bytes)
    expected = canon.serialise(parsed, drop_keys=drop, max_depth=max_depth)
    got = fast.parse_and_serialise(value, drop, max_bytes, max_depth)
    assert got[1:] == (expected.form, expected.text, expected.flags)
    assert json.dumps(got[0], allow_nan=True, default=repr) == json.dumps(parsed.value, allow_nan=True, default=repr)


@PROPS
@given(values, st.frozensets(st.sampled_from(["a", "timestamp", "id", ""]), max_size=3), st.sampled_from(["", " "]))
def test_one_step_equals_parse_then_serialise(value: Any, drop: frozenset[str], pad: str) -> None:
    try:
        text = pad + json.dumps(value, allow_nan=True, ensure_ascii=False)
    except ValueError:
        return
    _both(text, drop)
    _both(value, drop)  # already-parsed values take the general path


@pytest.mark.parametrize(
    "text",
    ['{"a":1e999}', '{"a":NaN}', '{"a":-Infinity}', '{"a":1,"a":2}', '"{\\"b\\":1}"', "[" * 70 + "]" * 70,
     "[" * 250 + "]" * 250, '{"timestamp":1,"x":{"timestamp":2}}', '{"\u00e9":"\u2028","\\u0000":"\\ud800"}',
     '{"a":1} ', '{"a":1}x', "{'a': 1}", "{", "[1,]", "", "x" * 300, '{"n":' + "9" * 5000 + "}", "\ufeff{}",
     '{"a":[1,2,{"b":null}]}', '[{"a":' * 35 + "1" + "}]" * 35, '{"a":' * 70 + "1" + "}" * 70,
     '" [1, {\\"b\\": 2}]"', "\u00a0{}", "[[[[1]]]]"],
)
@pytest.mark.parametrize("drop", [frozenset(), frozenset({"timestamp"}), frozenset({"a"})])
def test_one_step_equals_parse_then_serialise_on_odd_inputs(text: str, drop: frozenset[str]) -> None:
    _both(text, drop)
    _both(text, drop, max_bytes=64, max_depth=3)  # the limits are honoured the same way
    _both(text.encode(), drop)


def test_one_step_equals_the_general_path_under_a_deep_caller_stack() -> None:
    import sys

    text = '{"a":[[[[1]]]]}'

    def nested(n: int) -> Any:
        if n:
            return nested(n - 1)
        one = fast.parse_and_serialise(text, frozenset(), 1 << 18, 64)
        general = canon.serialise(canon.parse(text))
        return one[1:], (general.form, general.text, general.flags)

    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(200)
        for depth in range(150, 200, 2):
            try:
                one, general = nested(depth)
            except RecursionError:
                continue  # the test's own frames ran out first
            # Equal, unless the general path (a few frames deeper: its walk recurses) ran out of
            # stack first, which its flags then say (the value is far shallower than max_depth).
            assert one == general or general[2] & {canon.OPAQUE_TEXT, canon.TOO_DEEP}, depth
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("spelling", ['"\\u0074imestamp"', '"time\\u0073tamp"', '"\\u0074\\u0069mestamp"'])
def test_a_volatile_key_spelt_with_escapes_is_dropped_too(spelling: str) -> None:
    """The shortcut tests raw text for keys to drop; an escaped spelling must not slip past it."""
    fp = Fingerprinter(DigestKey(b"k" * 32), Policy())
    plain = fp.result("t", '{"timestamp":1,"b":2}').digest
    assert fp.result("t", '{"timestamp":9,"b":2}').digest == plain
    assert fp.result("t", "{%s:9,\"b\":2}" % spelling).digest == plain
    assert fp.result("t", '{"b":3}').digest != plain  # negative control: a real change still shows


# --- orjson where it reads and writes exactly as the standard library ---------------------------


def test_the_orjson_path_is_taken_for_ordinary_json() -> None:
    # Not a contract, but the speed depends on it: flag a silent fallback (orjson missing).
    assert fast._orjson('{"b": [1, true, null], "a": "\u00e9:x"}') == (
        {"b": [1, True, None], "a": "\u00e9:x"}, '{"a":"\u00e9:x","b":[1,true,null]}'.encode()
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":2}',  # a duplicate key: orjson keeps the last one silently
        '{"a" :1,"a" :2,"b":"x\\":"}',  # ...with colons that could hide it from a naive count
        '{"x":{"k":1,"k":2},"y":[{"k":3}]}',
        '{"a":0.00001}', '{"a":1e-7}', '[1e16]', '[-1.5e300]',  # floats orjson writes differently
        '{"a":18446744073709551616}', '[-9223372036854775809]',  # beyond 64 bits: orjson reads floats
        '{"\\u0061":1,"a":2}', '{"a":"\\u003a"}',  # escapes: the colon count no longer holds
        '{"a":1} ', '[1]\n',  # trailing whitespace: the stdlib path decides
        '{"a":NaN}', '[1e999]', '["\\ud800"]',  # flags: orjson refuses them
    ],
)
def test_the_orjson_path_declines_what_orjson_could_read_differently(text: str) -> None:
    assert fast._orjson(text) is None
    _both(text, frozenset())


@pytest.mark.parametrize("text", ['{"a":1.5}', '[-0.0]', '[0.0001,0.25,3.0]', '{"p":1000000000000000.0}',
                                  '{"s":"re-run e-mail 0.00001","x":0.5}'])
def test_floats_orjson_writes_as_the_stdlib_take_the_shortcut(text: str) -> None:
    assert fast._orjson(text) is not None
    _both(text, frozenset())


_keys = st.text(max_size=4) | st.sampled_from(["a", "a:", ":", "k"])
_separators = st.sampled_from([":", ": ", " : ", " :"])


@PROPS
@given(st.lists(st.tuples(_keys, values), max_size=6), _separators, st.sampled_from([",", ", "]))
def test_objects_with_repeated_keys_and_colons_equal_the_stdlib(pairs: list[tuple[str, Any]], sep: str, comma: str) -> None:
    """Texts a Python dict cannot produce: repeated keys, colons in keys and values, spacing."""
    try:
        body = comma.join(json.dumps(k, ensure_ascii=False) + sep + json.dumps(v, ensure_ascii=False) for k, v in pairs)
    except ValueError:
        return
    for text in ("{" + body + "}", "[{" + body + "}," + json.dumps([k for k, _ in pairs]) + "]"):
        _both(text, frozenset())
        _both(text, frozenset({"a"}))


@PROPS
@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers(min_value=-(2**70), max_value=2**70))
def test_numbers_equal_the_stdlib(number: float) -> None:
    _both(json.dumps({"n": number, "list": [number]}), frozenset())


def test_without_orjson_the_digests_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A platform without orjson's wheels runs on the standard library alone, unchanged."""
    fp = Fingerprinter(DigestKey(b"fast-path-test-key-0123"), Policy())
    texts = ['{"b":1,"a":[true,null,"x:y"]}', '{"a":1,"a":2}', '{"f":1e-05}']
    with_orjson = [fp.action("t", t) for t in texts]
    monkeypatch.setattr(fast, "_orjson_loads", None)
    assert fast._orjson(texts[0]) is None
    assert [Fingerprinter(DigestKey(b"fast-path-test-key-0123"), Policy()).action("t", t) for t in texts] == with_orjson


# --- the whole digest, as documented (docs/fingerprints.md, "Keyed digests") --------------------


@pytest.mark.parametrize("tool", ["lookup_order", "caf\u00e9 \"quoted\"", "", "\U0001f600",
                                  "\u00e9" * 300, "lone \ud800 surrogate"])  # past the cached length; not UTF-8
def test_action_and_result_digests_are_hmac_of_the_framed_message(tool: str) -> None:
    """Hashing the (domain, tool) prefix once must give the digest of the whole message."""
    secret = b"known-answer-key-0123456789"
    fp = Fingerprinter(DigestKey(secret), Policy())

    def expected(domain: str, text: str, t: str = tool) -> str:
        message = "\x00".join(("loopguard.v1", domain, json.dumps(t, ensure_ascii=False), "", "json", text))
        return hmac.new(secret, message.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()[:16].hex()

    for _ in range(2):  # the second round uses the prepared prefixes (and the memo)
        assert fp.action(tool, '{"b": 1, "a": [true]}').digest == expected("action", '{"a":[true],"b":1}')
        assert fp.result(tool, '{"x": "\u00e9"}').digest == expected("result", '{"x":"\u00e9"}', "")
    other = fp.action(tool + "x", '{"b": 1, "a": [true]}').digest  # negative control: the tool counts
    assert other == expected("action", '{"a":[true],"b":1}', tool + "x") != expected("action", '{"a":[true],"b":1}')


@PROPS
@given(values, st.sampled_from(["t", "get_status", "search"]))
def test_digest_only_paths_equal_the_full_ones(value: Any, tool: str) -> None:
    """action_digest / result_digest (native bytes straight into the HMAC, memo) equal
    action_parts / result_parts (text decoded, then encoded), under per-tool rules."""
    from otel_loopguard.policy import policy_from_mapping

    policy = policy_from_mapping({"tools": {"get_status": {"result_volatile_fields": ["a", "etag"]},
                                            "search": {"ignore_fields": ["debug"], "defaults": {"limit": 10}}}})
    try:
        text = json.dumps(value, allow_nan=True, ensure_ascii=False)
    except ValueError:
        return
    fp = Fingerprinter(DigestKey(b"digest-only-paths-key-0123"), policy)
    rule = policy.rule(tool)
    for payload in (text, value):
        for _ in range(2):  # the second from the memo
            assert fp.action_digest(tool, rule, payload) == fp.action_parts(tool, rule, payload)[:2]
            assert fp.result_digest(tool, rule, payload) == fp.result_parts(tool, rule, payload)[:2]


def test_an_orjson_writing_unsigned_exponents_is_not_trusted_on_floats(monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson before 3.11.7 wrote 1e16 where the stdlib writes 1e+16 (and 1e20 for an
    integer beyond 64 bits): the float search must then run on every output."""
    import orjson

    # the positive control: the orjson installed here (3.11.7 or later) writes signed exponents
    assert fast._signed_exponents() is True
    with monkeypatch.context() as m:
        m.setattr(fast, "_orjson_loads", None)
        assert fast._signed_exponents() is False  # no orjson at all
    monkeypatch.setattr(fast, "_orjson_dumps", lambda v, option=0: orjson.dumps(v, option=option).replace(b"e-", b"e"))
    assert fast._signed_exponents() is False  # negative exponents count too
    monkeypatch.setattr(fast, "_orjson_dumps", lambda v, option=0: orjson.dumps(v, option=option).replace(b"e+", b"e"))
    assert fast._signed_exponents() is False
    monkeypatch.setattr(fast, "_SIGNED_EXPONENTS", False)
    for text in ('[1e16]', '{"n":100000000000000000000}', '{"n":1E300}'):
        assert fast._orjson(text) is None
        _both(text, frozenset())
    assert fast._orjson('{"a":1}') is not None  # negative control: ints and text still go native


@pytest.mark.parametrize("text", ['{"a\\/b":1,"x":2}', '{"y":{"a\\/b":1},"x":[2]}', '{"q\\"k":1,"x":2}'])
def test_a_key_to_drop_written_with_a_short_escape_is_dropped(text: str) -> None:
    drop = frozenset({"a/b", 'q"k'})
    got = fast.parse_and_serialise(text, drop, canon.DEFAULT_MAX_BYTES, canon.DEFAULT_MAX_DEPTH)
    assert "a/b" not in got[2] and 'q\\"k' not in got[2] and '"x"' in got[2]
    assert got[2] == _general(text, drop).text  # the walk, which compares parsed keys


def test_the_memo_keeps_no_flagged_digest() -> None:
    """A flag can depend on the caller's stack (a recursion limit turns parsing into opaque
    text): such a digest is computed each time, never served to later calls."""
    fp = Fingerprinter(DigestKey(b"fast-path-test-key-0123"), Policy())
    deep = "[" * 70 + "1" + "]" * 70  # deeper than max_depth: flagged too_deep
    digest, flags = fp.action_digest("t", fp.policy.rule("t"), deep)
    assert flags and not fp._actions
    assert fp.action_digest("t", fp.policy.rule("t"), '{"a":1}')[1] == frozenset() and len(fp._actions) == 1


# --- orjson_flat: parsed flat objects (unwrapped results, parsed arguments) ------------------
_odd_floats = st.sampled_from([1e-7, 1e-5, 0.0001, 1e16, 1e22, -0.0, 5e-324, 2.0**64, 1.5, float("nan"), float("inf")])
_flat_scalars = scalars | _odd_floats | st.sampled_from(["\ud800", "a\udfffb", "\u2028", "\x00\x1f", "é\"\\/"])


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=8) | st.sampled_from(["timestamp", "id", "\ud800"]), _flat_scalars, max_size=8),
       st.frozensets(st.sampled_from(["a", "timestamp", "id"]), max_size=2))
def test_orjson_flat_equals_the_general_path_whenever_it_answers(obj: dict[str, Any], drop: frozenset[str]) -> None:
    got = fast.orjson_flat(obj, drop)
    general = canon.serialise(canon.parse(obj), drop_keys=drop)
    if got is not None:
        assert general.flags == canon.NO_FLAGS
        assert got == general.text.encode("utf-8")


@pytest.mark.parametrize("obj", [
    {"content": "order A-1: pending", "status": "success"}, {"b": 1, "a": [1][0], "c": True, "d": None},
    {"x": 1.5, "y": -0.0, "z": 123456789.25}, {}, {"é": "ü", "k": "line\nbreak"},
])
def test_orjson_flat_takes_ordinary_flat_objects(obj: dict[str, Any]) -> None:
    got = fast.orjson_flat(obj, frozenset({"timestamp"}))
    assert got is not None and got.decode() == canon.serialise(canon.parse(obj)).text


def test_orjson_flat_declines_what_only_the_general_path_gets_right() -> None:
    import enum

    class Colour(str, enum.Enum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    declined = [
        {"a": {"nested": 1}}, {"a": [1, 2]}, {1: "int key"}, {"a": float("nan")}, {"a": float("inf")},
        {"a": 1e-7}, {"a": 1e22}, {"a": 2**70}, {"a": "\ud800"}, {"a": Colour.RED}, {"a": Level.HIGH},
        {"timestamp": 1, "a": 2}, ["not", "an", "object"], "text", None, {f"k{i}": i for i in range(65)},
    ]
    for obj in declined:
        assert fast.orjson_flat(obj, frozenset({"timestamp"})) is None, obj


def test_an_unwrapped_result_takes_the_orjson_path_and_keeps_its_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    fp = Fingerprinter(DigestKey(b"native-flat-digest-key-01234"), Policy())
    rule = fp.policy.rule("lookup")
    result = {"content": "order A-1: pending", "status": "success"}
    arguments = {"order_id": "A-1", "include_items": True, "limit": 5}
    expected = fp.result_parts("lookup", rule, result)[:2], fp.action_parts("lookup", rule, arguments)[:2]
    walked: list[Any] = []
    real = canon._walk
    monkeypatch.setattr(canon, "_walk", lambda *a: walked.append(a) or real(*a))
    assert (fp.result_digest("lookup", rule, result), fp.action_digest("lookup", rule, arguments)) == expected
    assert walked == []  # mutation check: without orjson_flat both would have been walked


@settings(max_examples=examples(800), deadline=None)
@given(st.sampled_from(["", " ", "\n\t", "\r", "\x0c", "\xa0", "\u3000"]),
       st.text(max_size=6) | st.sampled_from(["NaN", "Infinity", "-Infinity", "true", "null", "1", "-0", "{}", "[1]",
                                              '"s"', "tru", "nul", "+1", ".5", "'a'", "None", "True", "{'a': 1}"]),
       st.text(max_size=4))
def test_text_settled_as_prose_without_a_decode_is_text_the_decoder_refuses(before: str, body: str, after: str) -> None:
    """parse() calls text that cannot begin JSON opaque at once: the decoder must agree."""
    text = before + body + after
    if text.lstrip(" \t\n\r")[:1] not in canon._JSON_STARTS:
        with pytest.raises(ValueError):
            json.loads(text)
        assert canon.parse(text) == canon.Parsed(text, "text", frozenset({canon.OPAQUE_TEXT}))


def test_the_prepared_prefixes_stay_bounded_and_right_past_their_bound() -> None:
    from otel_loopguard.fingerprint import fingerprinter as fpmod

    fp = Fingerprinter(DigestKey(b"prefix-bound-test-key-0123"), Policy())
    first = fp.action("tool_0", "[1]").digest
    for i in range(fpmod.MEMO_ENTRIES + 5):
        fp.action(f"tool_{i}", "[1]")
    assert len(fp._prefixes) <= fpmod.MEMO_ENTRIES  # noqa: SLF001
    assert fp.action("tool_0", "[1]").digest == first
