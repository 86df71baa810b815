"""The `equivalence` policy key (docs/equivalence.md): defaults, per-tool overrides on top of
the policy's own, exempt tools, and errors that name the setting."""

from __future__ import annotations

import pytest

from otel_loopguard.errors import PolicyError
from otel_loopguard.policy import EquivalenceRule, Policy, policy_from_mapping
from otel_loopguard.policy.model import DEFAULT_FAILURE_FIELDS, EXACT_ONLY


def test_defaults() -> None:
    eq = Policy().equivalence
    assert (eq.shape, eq.items, eq.echo, eq.similarity, eq.failure_text) == (True, True, True, 0.6, True)
    assert eq.failure_fields == DEFAULT_FAILURE_FIELDS and "exit_code" in eq.failure_fields
    assert eq.item_fields == ("url", "link", "href", "uri") and eq.exempt is False
    assert Policy().equivalence_for(Policy().rule("any")) is eq


def test_a_tool_override_starts_from_the_policys_equivalence() -> None:
    pol = policy_from_mapping({"equivalence": {"similarity": 0.7, "echo": False},
                               "tools": {"search": {"equivalence": {"item_fields": ["id"]}}}})
    own = pol.equivalence_for(pol.rule("search"))
    assert (own.similarity, own.echo, own.item_fields) == (0.7, False, ("id",))
    assert pol.equivalence_for(pol.rule("other")).item_fields == EquivalenceRule().item_fields


def test_exempt_tools_and_the_per_tool_switch() -> None:
    pol = policy_from_mapping({"equivalence": {"exempt_tools": ["poll_raw"]},
                               "tools": {"legacy": {"equivalence": {"exempt": True}}, "poll_raw": {"max_calls": 9}}})
    assert pol.equivalence_for(pol.rule("poll_raw")) == EXACT_ONLY and pol.rule("poll_raw").max_calls == 9
    assert pol.equivalence_for(pol.rule("legacy")) == EXACT_ONLY
    assert pol.equivalence_for(pol.rule("other")).exempt is False


def test_similarity_null_turns_near_duplicates_off() -> None:
    assert policy_from_mapping({"equivalence": {"similarity": None}}).equivalence.similarity is None


@pytest.mark.parametrize("data,message", [
    ({"equivalence": {"similarity": 0}}, "equivalence.similarity: expected a number in (0, 1]"),
    ({"equivalence": {"similarity": 1.5}}, "equivalence.similarity: expected a number in (0, 1]"),
    ({"equivalence": {"shape": "yes"}}, "equivalence.shape: expected true or false"),
    ({"equivalence": {"exempt": True}}, "equivalence.exempt: unknown key"),
    ({"equivalence": {"failure_fields": "exit_code"}}, "equivalence.failure_fields: expected a list of strings"),
    ({"tools": {"t": {"equivalence": {"exempt_tools": ["x"]}}}}, "tools.t.equivalence.exempt_tools: unknown key"),
    ({"tools": {"t": {"equivalence": {"item_fields": [""]}}}}, "tools.t.equivalence.item_fields[0]: expected"),
    ({"tools": {"t": {"equivalence": {"items_path": 3}}}}, "tools.t.equivalence.items_path: expected"),
])
def test_errors_name_the_setting(data: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        policy_from_mapping(data)


def test_the_content_version_changes_with_an_equivalence_setting() -> None:
    assert policy_from_mapping({"equivalence": {"similarity": 0.6}}).version != policy_from_mapping({}).version
