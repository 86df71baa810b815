"""Policy defaults, validation of mappings, and loading YAML/JSON files."""

from __future__ import annotations

import json
import re
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_loopguard.errors import LoopguardError, PolicyError
from otel_loopguard.policy import (
    BUILTIN_VERSION,
    Policy,
    Price,
    RepeatRule,
    StreakRule,
    ToolRule,
    content_version,
    load_policy,
    policy_from_mapping,
)

SHA_VERSION = re.compile(r"sha256:[0-9a-f]{12}")


def error_of(data: Any, source: str = "policy") -> str:
    with pytest.raises(PolicyError) as info:
        policy_from_mapping(data, source)
    return str(info.value)


# --- defaults (docs/policy.md) ---------------------------------------------------------------


def test_builtin_defaults_match_the_docs() -> None:
    p = Policy()
    assert p.version == BUILTIN_VERSION == "builtin-1"
    assert (p.repeat.mode, p.repeat.warn_at, p.repeat.stop_at, p.repeat.window) == ("consecutive", 3, 5, 20)
    assert (p.cycle.min_period, p.cycle.max_period, p.cycle.warn_at, p.cycle.stop_at) == (2, 4, 2, 3)
    assert (p.error_streak.warn_at, p.error_streak.stop_at) == (2, 4)
    assert (p.no_progress.warn_at, p.no_progress.stop_at) == (3, 6)
    b = p.budget
    assert (b.max_turns, b.max_tool_calls, b.max_cost_usd, b.max_seconds, b.warn_ratio) == (25, 60, None, 300.0, 0.8)
    assert dict(p.prices) == {}
    assert p.result_volatile_fields == {"timestamp", "request_id", "trace_id", "span_id", "nonce", "created_at", "loop_guard_notice"}
    assert (p.max_depth, p.max_bytes) == (64, 262144)
    assert dict(p.tools) == {}


def test_defaults_table_in_docs_names_the_same_numbers() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
    if not docs.exists():
        pytest.skip("docs/policy.md not present")
    table = docs.read_text(encoding="utf-8")
    for key, value in [
        ("repeat.warn_at", "3"),
        ("repeat.stop_at", "5"),
        ("cycle.warn_at", "2"),
        ("cycle.stop_at", "3"),
        ("error_streak.warn_at", "2"),
        ("error_streak.stop_at", "4"),
        ("no_progress.warn_at", "3"),
        ("no_progress.stop_at", "6"),
    ]:
        assert re.search(rf"\|\s*`{re.escape(key)}`\s*\|\s*`{value}`\s*\|", table), key


def test_no_policy_file_is_the_builtin_policy() -> None:
    assert load_policy(None) == Policy()


@pytest.mark.parametrize("data", [{}, None])
def test_an_empty_mapping_keeps_every_default(data: Any) -> None:
    p = policy_from_mapping(data)
    assert p.repeat == Policy().repeat
    assert p.cycle == Policy().cycle
    assert p.error_streak == StreakRule(2, 4)
    assert p.no_progress == StreakRule(3, 6)
    assert p.budget == Policy().budget
    assert SHA_VERSION.fullmatch(p.version)


def test_unknown_tool_gets_the_default_rule() -> None:
    p = policy_from_mapping({"tools": {"search": {"max_calls": 3}}})
    assert p.rule("other") == ToolRule()
    assert p.rule("search").max_calls == 3
    assert p.repeat_for("other") == p.repeat
    assert p.volatile_for("other") == p.result_volatile_fields


def test_policy_is_immutable() -> None:
    p = policy_from_mapping({"tools": {"search": {"ignore_fields": ["a"], "defaults": {"limit": 10}}}})
    with pytest.raises(FrozenInstanceError):
        p.version = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.tools["new"] = ToolRule()  # type: ignore[index]
    with pytest.raises(TypeError):
        p.rule("search").defaults["limit"] = 11  # type: ignore[index]
    assert p.rule("search").ignore_fields == ("a",)


# --- values are applied -----------------------------------------------------------------------


def test_values_are_applied_and_partial_sections_keep_other_defaults() -> None:
    p = policy_from_mapping(
        {
            "repeat": {"warn_at": 2},
            "error_streak": {"stop_at": 6},
            "no_progress": {"warn_at": 4, "stop_at": 8},
            "budget": {"max_turns": None, "max_cost_usd": 2},
            "prices": {"*": {"input": 3.0, "output": 15}},
            "result_volatile_fields": ["etag"],
            "max_depth": 10,
            "max_bytes": 1024,
        }
    )
    assert (p.repeat.warn_at, p.repeat.stop_at) == (2, 5)
    assert p.error_streak == StreakRule(2, 6)
    assert p.no_progress == StreakRule(4, 8)
    assert p.budget.max_turns is None
    assert p.budget.max_cost_usd == 2.0
    assert p.budget.max_tool_calls == 60
    assert p.price_for("gpt-x") == Price(3.0, 15.0)
    assert p.result_volatile_fields == {"etag"}
    assert (p.max_depth, p.max_bytes) == (10, 1024)


def test_tool_repeat_overrides_inherit_the_global_repeat_rule() -> None:
    p = policy_from_mapping({"repeat": {"stop_at": 8, "warn_at": 4}, "tools": {"poll": {"repeat": {"stop_at": 10}}}})
    assert p.repeat_for("poll") == RepeatRule(mode="consecutive", warn_at=4, stop_at=10, window=20)
    assert p.repeat_for("other") == RepeatRule(mode="consecutive", warn_at=4, stop_at=8, window=20)


def test_allowed_repeats_is_the_seed_rule() -> None:
    p = policy_from_mapping({"repeat": {"allowed_repeats": 2}})
    assert p.repeat.stop_at == 3  # two identical calls pass, the third is the finding
    assert p.repeat.warn_at <= p.repeat.stop_at
    q = policy_from_mapping({"tools": {"lookup": {"repeat": {"allowed_repeats": 1}}}})
    assert q.repeat_for("lookup").stop_at == 2
    assert q.repeat_for("other").stop_at == 5


def test_idempotency_key_implies_side_effect() -> None:
    p = policy_from_mapping({"tools": {"refund": {"idempotency_key": "key"}}})
    assert p.rule("refund").side_effect is True
    q = policy_from_mapping({"tools": {"refund": {"idempotency_key": "key", "side_effect": True}}})
    assert q.rule("refund").side_effect is True


def test_the_loose_cycle_switch_is_per_tool_and_on_by_default() -> None:
    p = policy_from_mapping({"tools": {"bash": {"loose_cycle": False}, "read": {"max_calls": 3}}})
    assert p.rule("bash").loose_cycle is False and p.rule("read").loose_cycle is True
    assert p.rule("other").loose_cycle is True and Policy().rule("bash").loose_cycle is True


def test_full_tool_rule_is_read() -> None:
    p = policy_from_mapping(
        {
            "tools": {
                "t": {
                    "exempt_repeat": True,
                    "progress": {"state_field": "state", "terminal_states": ["done"]},
                    "ignore_fields": ["nonce"],
                    "defaults": {"limit": 10},
                    "identity_fields": ["tenant"],
                    "poll": {"max_polls": 5, "deadline_seconds": 60},
                    "max_calls": 7,
                    "result_volatile_fields": ["etag"],
                    "enforce": False,
                }
            }
        }
    )
    r = p.rule("t")
    assert r.exempt_repeat is True
    assert r.progress is not None and r.progress.state_field == "state"
    assert r.progress.terminal_states == ("done",)
    assert r.ignore_fields == ("nonce",)
    assert dict(r.defaults) == {"limit": 10}
    assert r.identity_fields == ("tenant",)
    assert r.poll is not None and (r.poll.max_polls, r.poll.deadline_seconds) == (5, 60.0)
    assert r.max_calls == 7
    assert r.result_volatile_fields == {"etag"}
    assert r.enforce is False
    assert p.volatile_for("t") == {"etag"}


# --- unknown keys: the full dotted path ----------------------------------------------------------


@pytest.mark.parametrize(
    "data, path",
    [
        ({"tools": {"search": {"repeat": {"stopat": 3}}}}, "tools.search.repeat.stopat"),
        ({"repat": {}}, "repat"),
        ({"repeat": {"stopat": 3}}, "repeat.stopat"),
        ({"cycle": {"period": 2}}, "cycle.period"),
        ({"budget": {"max_turn": 3}}, "budget.max_turn"),
        ({"error_streak": {"stop": 3}}, "error_streak.stop"),
        ({"tools": {"search": {"ignore_field": ["a"]}}}, "tools.search.ignore_field"),
        ({"tools": {"search": {"progress": {"cursor": "c"}}}}, "tools.search.progress.cursor"),
        ({"tools": {"search": {"poll": {"polls": 3}}}}, "tools.search.poll.polls"),
        ({"prices": {"gpt": {"inputs": 1, "output": 2}}}, "prices.gpt.inputs"),
    ],
)
def test_unknown_keys_are_rejected_with_their_full_path(data: dict[str, Any], path: str) -> None:
    message = error_of(data, "policy.yaml")
    assert message.startswith(f"policy.yaml: {path}: unknown key")
    assert "known keys" in message


def test_unknown_key_error_lists_the_known_keys() -> None:
    message = error_of({"tools": {"search": {"repeat": {"stopat": 3}}}})
    for known in ("allowed_repeats", "mode", "stop_at", "warn_at", "window"):
        assert known in message


def test_policy_errors_are_loopguard_errors() -> None:
    assert issubclass(PolicyError, LoopguardError)


# --- wrong types and values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, path",
    [
        ({"repeat": {"warn_at": "3"}}, "repeat.warn_at"),
        ({"repeat": {"warn_at": True}}, "repeat.warn_at"),
        ({"repeat": {"stop_at": 0}}, "repeat.stop_at"),
        ({"repeat": {"stop_at": 2.5}}, "repeat.stop_at"),
        ({"repeat": {"mode": "sometimes"}}, "repeat.mode"),
        ({"cycle": {"min_period": 1}}, "cycle.min_period"),
        ({"budget": {"max_cost_usd": -1}}, "budget.max_cost_usd"),
        ({"budget": {"max_cost_usd": "2"}}, "budget.max_cost_usd"),
        ({"budget": {"warn_ratio": 1.5}}, "budget.warn_ratio"),
        ({"budget": {"max_seconds": float("nan")}}, "budget.max_seconds"),
        ({"version": ""}, "version"),
        ({"version": 3}, "version"),
        ({"max_depth": 0}, "max_depth"),
        ({"max_bytes": 10}, "max_bytes"),
        ({"result_volatile_fields": "timestamp"}, "result_volatile_fields"),
        ({"result_volatile_fields": ["ok", 3]}, "result_volatile_fields[1]"),
        ({"tools": []}, "tools"),
        ({"tools": {"search": None}}, "tools.search"),
        ({"tools": {"search": {"ignore_fields": "debug"}}}, "tools.search.ignore_fields"),
        ({"tools": {"search": {"ignore_fields": [""]}}}, "tools.search.ignore_fields[0]"),
        ({"tools": {"search": {"side_effect": "yes"}}}, "tools.search.side_effect"),
        ({"tools": {"search": {"exempt_repeat": 1}}}, "tools.search.exempt_repeat"),
        ({"tools": {"search": {"loose_cycle": "off"}}}, "tools.search.loose_cycle"),
        ({"tools": {"search": {"defaults": [1]}}}, "tools.search.defaults"),
        ({"tools": {"search": {"max_calls": 0}}}, "tools.search.max_calls"),
        ({"tools": {"search": {"repeat": {"warn_at": -1}}}}, "tools.search.repeat.warn_at"),
        ({"tools": {"search": {"progress": {"terminal_states": "done"}}}}, "tools.search.progress.terminal_states"),
        ({"tools": {"search": {"poll": {"max_polls": "many"}}}}, "tools.search.poll.max_polls"),
        ({"prices": {"gpt": 3}}, "prices.gpt"),
        ({"prices": {"gpt": {"input": -1, "output": 1}}}, "prices.gpt.input"),
    ],
)
def test_wrong_types_are_rejected_with_their_path(data: dict[str, Any], path: str) -> None:
    message = error_of(data)
    assert message.startswith(f"policy: {path}: ")


def test_a_policy_that_is_not_a_mapping_is_rejected() -> None:
    assert "expected a mapping" in error_of([1, 2])
    assert "expected a mapping" in error_of("repeat: 3")


def test_non_string_keys_are_rejected() -> None:
    assert "keys must be strings" in error_of({"tools": {1: {}}})


# --- inconsistent thresholds and rules ------------------------------------------------------------


@pytest.mark.parametrize(
    "data, path",
    [
        ({"repeat": {"warn_at": 6, "stop_at": 5}}, "repeat.warn_at"),
        ({"repeat": {"warn_at": 6}}, "repeat.warn_at"),  # against the default stop_at 5
        ({"cycle": {"warn_at": 4}}, "cycle.warn_at"),
        ({"error_streak": {"warn_at": 5}}, "error_streak.warn_at"),
        ({"no_progress": {"warn_at": 7, "stop_at": 6}}, "no_progress.warn_at"),
        ({"tools": {"s": {"repeat": {"warn_at": 9}}}}, "tools.s.repeat.warn_at"),
        ({"repeat": {"stop_at": 8, "warn_at": 7}, "tools": {"s": {"repeat": {"stop_at": 6}}}}, "tools.s.repeat.warn_at"),
    ],
)
def test_warn_at_above_stop_at_is_rejected(data: dict[str, Any], path: str) -> None:
    message = error_of(data)
    assert f"{path}: must be <= stop_at" in message


def test_warn_at_equal_to_stop_at_is_allowed() -> None:
    assert policy_from_mapping({"repeat": {"warn_at": 4, "stop_at": 4}}).repeat.stop_at == 4


def test_other_inconsistencies_are_rejected() -> None:
    assert "cycle.min_period" in error_of({"cycle": {"min_period": 5, "max_period": 3}})
    assert "repeat.window" in error_of({"repeat": {"mode": "window", "window": 3}})


@pytest.mark.parametrize(
    "data, path",
    [
        ({"repeat": {"allowed_repeats": 2, "stop_at": 3}}, "repeat"),
        ({"tools": {"s": {"repeat": {"allowed_repeats": 2, "stop_at": 4}}}}, "tools.s.repeat"),
    ],
)
def test_allowed_repeats_together_with_stop_at_is_rejected(data: dict[str, Any], path: str) -> None:
    message = error_of(data)
    assert f"policy: {path}: " in message
    assert "allowed_repeats" in message and "stop_at" in message


def test_identity_fields_cannot_be_ignored() -> None:
    message = error_of({"tools": {"lookup": {"identity_fields": ["tenant", "user"], "ignore_fields": ["tenant", "x"]}}})
    assert message.startswith("policy: tools.lookup: ")
    assert "tenant" in message
    assert "user" not in message


def test_idempotency_key_on_a_tool_without_side_effect_is_rejected() -> None:
    message = error_of({"tools": {"refund": {"side_effect": False, "idempotency_key": "key"}}})
    assert "tools.refund.idempotency_key" in message


def test_a_price_missing_a_field_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match=r"prices\.gpt"):
        policy_from_mapping({"prices": {"gpt": {"input": 1.0}}})


def test_odd_default_values_do_not_break_the_content_version() -> None:
    p = policy_from_mapping({"tools": {"t": {"defaults": {"opts": {1: "a", "b": "c"}}}}})
    assert SHA_VERSION.fullmatch(p.version)
    # a lone surrogate (JSON text may escape one) is content too
    odd = policy_from_mapping({"tools": {"t": {"defaults": {"q": "\ud800"}}}})
    assert SHA_VERSION.fullmatch(odd.version)
    assert odd.version != policy_from_mapping({"tools": {"t": {"defaults": {"q": "\ud801"}}}}).version


# --- versions -------------------------------------------------------------------------------------


def test_explicit_version_is_kept() -> None:
    assert policy_from_mapping({"version": "2026-11-30", "repeat": {"warn_at": 2}}).version == "2026-11-30"


def test_content_version_is_stable_and_independent_of_key_order() -> None:
    a = {"repeat": {"warn_at": 2, "stop_at": 4}, "tools": {"x": {"max_calls": 3, "ignore_fields": ["n"]}}}
    b = {"tools": {"x": {"ignore_fields": ["n"], "max_calls": 3}}, "repeat": {"stop_at": 4, "warn_at": 2}}
    va = policy_from_mapping(a).version
    assert SHA_VERSION.fullmatch(va)
    assert va == policy_from_mapping(b).version == policy_from_mapping(json.loads(json.dumps(a))).version
    assert va == content_version(a)


def test_content_version_changes_with_the_content() -> None:
    versions = {
        policy_from_mapping(d).version
        for d in (
            {},
            {"repeat": {"warn_at": 2}},
            {"repeat": {"warn_at": 1}},
            {"tools": {"x": {"ignore_fields": ["a", "b"]}}},
            {"tools": {"x": {"ignore_fields": ["b", "a"]}}},
        )
    }
    assert len(versions) == 5


def test_content_version_is_a_known_value() -> None:
    """Same content -> the same version in every process (no hash randomisation)."""
    import hashlib

    data = {"repeat": {"warn_at": 2}}
    expected = "sha256:" + hashlib.sha256(b'{"repeat":{"warn_at":2}}').hexdigest()[:12]
    assert policy_from_mapping(data).version == expected


# --- files ------------------------------------------------------------------------------------------

POLICY_YAML = """\
# a policy file
repeat: {mode: consecutive, warn_at: 2, stop_at: 4}
budget:
  max_turns: 30
tools:
  search:
    ignore_fields: [request_nonce]
    defaults: {limit: 10}
    repeat: {allowed_repeats: 2}
  issue_refund:
    idempotency_key: idempotency_key
"""


def test_load_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_YAML, encoding="utf-8")
    p = load_policy(path)
    assert (p.repeat.warn_at, p.repeat.stop_at) == (2, 4)
    assert p.budget.max_turns == 30
    assert p.rule("search").ignore_fields == ("request_nonce",)
    assert dict(p.rule("search").defaults) == {"limit": 10}
    assert p.repeat_for("search").stop_at == 3
    assert p.rule("issue_refund").side_effect is True
    assert SHA_VERSION.fullmatch(p.version)
    assert load_policy(str(path)) == p


def test_load_json_file_gives_the_same_policy_and_version(tmp_path: Path) -> None:
    data = yaml.safe_load(POLICY_YAML)
    yaml_path = tmp_path / "policy.yaml"
    yaml_path.write_text(POLICY_YAML, encoding="utf-8")
    json_path = tmp_path / "policy.json"
    json_path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    compact_path = tmp_path / "compact.json"
    compact_path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    from_yaml, from_json, from_compact = load_policy(yaml_path), load_policy(json_path), load_policy(compact_path)
    assert from_json == from_yaml == from_compact
    assert from_json.version == from_yaml.version


def test_explicit_version_in_a_file_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text('version: "2026-11-30"\nrepeat: {warn_at: 2}\n')
    assert load_policy(path).version == "2026-11-30"


def test_empty_file_is_the_default_thresholds(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    p = load_policy(path)
    assert p.repeat == Policy().repeat
    assert SHA_VERSION.fullmatch(p.version)


def test_invalid_content_error_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("tools:\n  search:\n    repeat: {stopat: 3}\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(info.value).startswith(f"{path}: tools.search.repeat.stopat: unknown key")


def test_invalid_json_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"repeat": {"warn_at": 7, "stop_at": 5}}')
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(path) in str(info.value)
    assert "repeat.warn_at" in str(info.value)


def test_unparsable_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("repeat: [1, 2\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(path) in str(info.value)


def test_missing_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(path) in str(info.value)


def test_a_file_that_is_not_a_mapping_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "scalar.yaml"
    path.write_text("42\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(path) in str(info.value)
    assert "expected a mapping" in str(info.value)


def test_tab_indented_json_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "tabs.json"
    path.write_text(json.dumps({"repeat": {"warn_at": 2}}, indent="\t"), encoding="utf-8")
    assert load_policy(path).repeat.warn_at == 2


def test_json_unicode_escapes_are_read_as_json(tmp_path: Path) -> None:
    path = tmp_path / "emoji.json"
    path.write_text('{"version": "v-\\ud83d\\ude00", "tools": {"t": {"ignore_fields": ["\\ud83d\\ude00"]}}}')
    p = load_policy(path)
    assert p.version == "v-\U0001F600"
    assert p.rule("t").ignore_fields == ("\U0001F600",)


# ---- a bad setting stops with its name, what was expected and what came -----------------------


@pytest.mark.parametrize("mapping, message", [
    ({"budget": {"warn_ratio": 0}}, "budget.warn_ratio: expected a number in (0, 1], got 0.0"),
    ({"budget": {"warn_ratio": 1.5}}, "budget.warn_ratio: expected a number in (0, 1], got 1.5"),
    ({"budget": {"warn_ratio": "x"}}, 'budget.warn_ratio: expected a number >= 0, got "x"'),
    ({"budget": {"max_cost_usd": -1}}, "budget.max_cost_usd: expected a number >= 0, got -1"),
    ({"tools": {"t": {"side_effect": "yes"}}}, 'tools.t.side_effect: expected true or false, got "yes"'),
    ({"tools": {"t": {"ignore_fields": "debug"}}}, 'tools.t.ignore_fields: expected a list of strings, got "debug"'),
    ({"repeat": {"mode": "sometimes"}}, 'repeat.mode: expected one of consecutive, window, got "sometimes"'),
    ({"tools": {"t": {"ignore_fields": [1]}}}, "tools.t.ignore_fields[0]: expected a non-empty string, got 1"),
    ({"tools": {"t": {"ignore_fields": ["a", "b"], "identity_fields": ["b", "a"]}}},
     "tools.t: identity fields cannot be ignored: a, b"),
    ({"max_bytes": 63}, "max_bytes: expected an integer >= 64, got 63"),
    ([1], "top level: expected a mapping, got [1]"),
])
def test_a_bad_setting_names_itself_the_expectation_and_the_value(mapping: Any, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        policy_from_mapping(mapping)
    assert str(info.value) == f"policy: {message}"


def test_a_value_json_cannot_show_is_shown_by_its_repr() -> None:
    with pytest.raises(PolicyError, match=r'^policy: prices\.m\.input: expected a number >= 0, got "<object object at '):
        policy_from_mapping({"prices": {"m": {"input": object()}}})


def test_a_model_without_a_name_takes_the_wildcard_price() -> None:
    pol = policy_from_mapping({"prices": {"*": {"input": 1.0, "output": 2.0}, "m": {"input": 5.0, "output": 5.0}}})
    assert pol.price_for(None) == pol.price_for("other") == pol.prices["*"]
    assert pol.price_for("m") == pol.prices["m"]


def test_a_price_keyed_by_the_empty_name_is_for_models_without_a_name() -> None:
    pol = policy_from_mapping({"prices": {"": {"input": 3.0, "output": 3.0}, "*": {"input": 1.0, "output": 1.0}}})
    assert pol.price_for(None) == pol.price_for("") == pol.prices[""]
    assert pol.price_for("named") == pol.prices["*"]


def test_the_smallest_max_bytes_is_accepted() -> None:
    assert policy_from_mapping({"max_bytes": 64}).max_bytes == 64
