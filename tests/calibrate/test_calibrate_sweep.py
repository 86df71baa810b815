"""`--sweep KEY=VALUES`: what it accepts, what it refuses and why, and that every key it
accepts leaves fingerprints alone (the one-pass design depends on it)."""

from __future__ import annotations

import pytest

from otel_loopguard.audit import read_runs
from otel_loopguard.calibrate.sweep import CURRENT, candidates, parse_sweep
from otel_loopguard.errors import PolicyError
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
from otel_loopguard.policy import Policy, policy_from_mapping

from calibrate_helpers import EXAMPLES, OBSERVED, RUN_ATTR


def test_values_ranges_lists_nulls_and_words() -> None:
    assert parse_sweep("repeat.stop_at=3..6").values == (3, 4, 5, 6)
    assert parse_sweep("budget.max_cost_usd=0.5,1,null").values == (0.5, 1, None)
    assert parse_sweep("tools.search.max_calls=5,10,5").values == (5, 10)  # duplicates once
    assert parse_sweep("repeat.mode=window").values == ("window",)
    assert parse_sweep("tools.poll_it.exempt_repeat=true").values == (True,)
    assert parse_sweep("tools.mcp.search.repeat.stop_at=4").path == ("tools", "mcp.search", "repeat", "stop_at")
    assert parse_sweep("tools.mcp.search.max_calls=4").path == ("tools", "mcp.search", "max_calls")


@pytest.mark.parametrize("text, words", [
    ("tools.search.ignore_fields=x", "change fingerprints"),
    ("tools.search.progress.items_field=items", "change fingerprints"),
    ("result_volatile_fields=a", "not a key calibrate can sweep"),
    ("tools..max_calls=3", "not a key calibrate can sweep"),
    ("repeat.stop_at", "expected KEY=VALUES"),
    ("repeat.stop_at=", "expected KEY=VALUES"),
    ("repeat.stop_at=8..3", "must run upwards"),
    ("repeat.stop_at=1..1000", "at most"),
])
def test_refusals_say_why(text: str, words: str) -> None:
    with pytest.raises(PolicyError, match=words):
        parse_sweep(text)


def test_a_bad_value_is_the_policys_own_error_naming_the_candidate() -> None:
    with pytest.raises(PolicyError, match=r"--sweep repeat.stop_at=0.*integer >= 1"):
        candidates(Policy(), {}, "p.yaml", [parse_sweep("repeat.stop_at=0")])


def test_a_stop_below_the_warn_level_lowers_the_warn_level_and_says_so() -> None:
    (_, low, high) = candidates(Policy(), {}, "p", [parse_sweep("repeat.stop_at=2,4")])
    assert (low.policy.repeat.warn_at, low.policy.repeat.stop_at, low.note) == (2, 2, "warn_at lowered to 2")
    assert (high.policy.repeat.warn_at, high.note) == (3, "")


def test_candidates_keep_the_rest_of_the_policy_file() -> None:
    data = {"version": "v7", "repeat": {"allowed_repeats": 4}, "tools": {"search": {"ignore_fields": ["nonce"]}}}
    base = policy_from_mapping(data)
    cur, cand = candidates(base, data, "p", [parse_sweep("tools.search.max_calls=3")])
    assert cur.name == CURRENT and cur.policy is base
    assert cand.policy.version == "v7+tools.search.max_calls=3"
    assert cand.policy.rule("search").ignore_fields == ("nonce",) and cand.policy.rule("search").max_calls == 3
    assert cand.policy.repeat.stop_at == 5  # allowed_repeats 4: the fifth is the finding
    (_, swapped) = candidates(base, data, "p", [parse_sweep("repeat.stop_at=7")])
    assert swapped.policy.repeat.stop_at == 7  # stop_at replaces allowed_repeats, no "give one, not both"
    assert data["repeat"] == {"allowed_repeats": 4}  # the file's content is not changed


EVERY_KEY = ["repeat.stop_at=2", "repeat.warn_at=1", "repeat.window=30", "repeat.mode=window",
             "repeat.progress_resets=false", "cycle.max_period=6", "cycle.compare=actions", "error_streak.same_tool=true",
             "no_progress.stop_at=2", "budget.max_tool_calls=2", "budget.warn_ratio=0.5",
             "tools.lookup_order.max_calls=1", "tools.lookup_order.exempt_repeat=true", "tools.lookup_order.loose_cycle=false",
             "tools.lookup_order.repeat.stop_at=2", "tools.get_export_status.poll.max_polls=2",
             "tools.search_cases.poll.deadline_seconds=1",
             "equivalence.similarity=0.8", "equivalence.similarity=null", "equivalence.shape=false",
             "equivalence.items=false", "equivalence.echo=false", "tools.lookup_order.equivalence.similarity=0.3",
             "tools.lookup_order.equivalence.items=false"]


def test_every_sweepable_key_leaves_every_fingerprint_as_it_was() -> None:
    runs = read_runs([*sorted(EXAMPLES.glob("*.ndjson")), OBSERVED], RUN_ATTR)
    key = load_key(key="sweep-test-key-0123456789")
    base = Fingerprinter(key, Policy())
    expected = [fingerprint_call(c, base) for r in runs for c in r.calls]
    for cand in candidates(Policy(), {}, "p", [parse_sweep(s) for s in EVERY_KEY])[1:]:
        fp = Fingerprinter(key, cand.policy)
        assert [fingerprint_call(c, fp) for r in runs for c in r.calls] == expected, cand.name


def test_the_fingerprint_check_above_can_fail() -> None:
    """Negative control: a key calibrate refuses does change fingerprints of the same calls."""
    runs = read_runs(sorted(EXAMPLES.glob("*.ndjson")))
    key = load_key(key="sweep-test-key-0123456789")
    plain = [fingerprint_call(c, Fingerprinter(key, Policy())) for r in runs for c in r.calls]
    ignoring = policy_from_mapping({"tools": {"lookup_order": {"ignore_fields": ["order_id"]}}})
    assert [fingerprint_call(c, Fingerprinter(key, ignoring)) for r in runs for c in r.calls] != plain


def test_sweeping_an_equivalence_switch_changes_verdicts_over_one_fingerprint_pass() -> None:
    """A sub-agent asked again with new preambles, answering the same refusal: near-duplicates
    make it a repeat; with `equivalence.similarity=null` only no_progress is left."""
    from otel_loopguard.calls import RawCall
    from otel_loopguard.detect import Run

    key = load_key(key="sweep-test-key-0123456789")
    fp = Fingerprinter(key, Policy())
    preambles = ("", "Again: ", "Please try once more. ", "Third time asking: ", "Now: ", "Last try: ")
    calls = [fingerprint_call(RawCall(seq=i + 1, tool="researcher", arguments={"input": p + "summarise the pricing "
                                      "of the three largest cloud vendors"}, result="I cannot browse the web."), fp)
             for i, p in enumerate(preambles)]
    kinds = {}
    for cand in candidates(Policy(), {}, "p", [parse_sweep("equivalence.similarity=null,0.5")]):
        run = Run("r", cand.policy)
        kinds[cand.name] = {f.kind for c in calls for f in run.observe(c)}
    assert "repeat" in kinds["current"] and "repeat" in kinds["equivalence.similarity=0.5"]
    assert "repeat" not in kinds["equivalence.similarity=null"] and "no_progress" in kinds["equivalence.similarity=null"]
