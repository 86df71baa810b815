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


@pytest.mark.real  # starts a process
def test_the_console_example_of_docs_processor_prints_the_tags_it_shows(tmp_path: Path) -> None:
    """docs/processor.md, "A tool span made by hand": the example as written, run as a script."""
    import os
    import subprocess
    import sys

    text = (ROOT / "docs" / "processor.md").read_text(encoding="utf-8")
    section = text.split("## A tool span made by hand", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = section.split("```\n", 2)[1].split("```", 1)[0]
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    env = {**os.environ, "OTEL_LOOPGUARD_KEY": "0123456789abcdef0123456789abcdef"}
    out = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    fifth = [block for block in out.split("\n}\n") if '"loopguard.seq": 5,' in block]
    assert len(fifth) == 1, out[-2000:]
    for line in shown.splitlines():
        key = line.split(":", 1)[0].strip()
        if line.startswith('"loopguard.') and key not in ('"loopguard.run.id"',):  # the trace id differs per run
            assert line in fifth[0], line
    assert '"loopguard.decision": "would_block"' in fifth[0]


def test_architecture_maps_every_module_in_one_line_each() -> None:
    """docs/architecture.md, "Modules": a row per module of the package (a package's own
    `__init__.py` is described by its docstring; the root's is the public API) and no row for a
    module that is gone."""
    root = Path(__file__).resolve().parents[1]
    package = root / "otel_loopguard"
    modules = {p.relative_to(package).as_posix() for p in package.rglob("*.py")
               if p.name != "__init__.py" or p.parent == package}
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip().strip("`") for line in section.splitlines() if line.startswith("| `")]
    assert sorted(m for m in modules if m not in rows) == [], "modules without a line in docs/architecture.md"
    assert sorted(r for r in rows if r not in modules) == [], "lines for modules that do not exist"
    assert len(rows) == len(set(rows))
