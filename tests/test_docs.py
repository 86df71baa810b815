"""docs/policy.md's default table matches the code, and the contract names are documented."""

import json
import re
from pathlib import Path

import pytest

from otel_loopguard.findings import KINDS
from otel_loopguard.policy import Policy

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| `([a-z_.]+)` \| `([^`]*)` \|", re.M)


def _documented_defaults() -> dict[str, str]:
    text = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    section = text.split("## Defaults", 1)[1].split("## Per-tool rules", 1)[0]
    return dict(ROW.findall(section))


def _actual(path: str) -> object:
    value: object = Policy()
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("key", sorted(_documented_defaults()))
def test_documented_default_matches_the_code(key: str) -> None:
    shown = _documented_defaults()[key]
    actual = _actual(key)
    if isinstance(actual, frozenset):
        assert shown == "[" + ", ".join(sorted(actual)) + "]"
    elif hasattr(actual, "keys"):
        assert json.loads(shown) == dict(actual)
    else:
        try:
            expected = json.loads(shown)
        except ValueError:
            expected = shown  # a bare word such as `consecutive`
        assert actual == expected, f"{key}: docs say {shown}, code has {actual!r}"


def test_the_default_table_covers_every_threshold() -> None:
    documented = set(_documented_defaults())
    for section in ("repeat", "cycle", "error_streak", "no_progress", "budget"):
        for name in vars(getattr(Policy(), section)):
            assert f"{section}.{name}" in documented


@pytest.mark.parametrize("name", [*KINDS, "loopguard.args.digest", "loopguard.seq", "loopguard.finding.kind", "loopguard.finding.span_ids"])
def test_contract_names_are_documented(name: str) -> None:
    docs = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    assert name in docs
