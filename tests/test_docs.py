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


_DOC_REF = re.compile(r"(\]\(|\b)((?:docs/)?[a-z_]+\.md)(?:#([a-z0-9-]+))?(?:\)|,? \(?\"([^\"]+)\")?")


def _headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines()
            if re.match(r"#{1,6} ", line)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _broken_references(text: str, here: Path) -> list[str]:
    """References to docs in `text`: `docs/x.md`, `docs/x.md#anchor`, `](x.md)`, and
    `docs/x.md, "Section"` (a heading of x.md starting with that text)."""
    broken = []
    for m in _DOC_REF.finditer(text):
        link, name, anchor, section = m.groups()
        if not (link or name.startswith("docs/")):
            continue  # a bare file name in prose (README.md, CHANGELOG.md) is not a link between docs
        target = (here.parent / name) if link else (ROOT / name)
        if not target.is_file():
            broken.append(m.group(0))
            continue
        headings = _headings(target)
        if anchor and anchor not in {_slug(h) for h in headings}:
            broken.append(m.group(0))
        plain = [h.replace("`", "") for h in headings]
        if section and not any(h.startswith(" ".join(section.replace("`", "").split())) for h in plain):
            broken.append(m.group(0))
    return broken


@pytest.mark.parametrize("path", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_reference_between_docs_resolves(path: Path) -> None:
    """Each doc names another by path, anchor or section heading; a renamed heading or a doc
    that is gone fails here, in the doc that points at it."""
    assert _broken_references(path.read_text(encoding="utf-8"), path) == []


def test_the_reference_check_catches_what_it_is_for() -> None:
    here = ROOT / "docs" / "receiver.md"
    assert _broken_references('see docs/policy.md, "Reloading" and docs/policy.md#progress', here) == []
    assert _broken_references('docs/policy.md, "Reloadin"', here) == []  # a prefix of the heading
    assert _broken_references('docs/nowhere.md', here) == ["docs/nowhere.md"]
    assert _broken_references('docs/policy.md#no-such-anchor', here) == ["docs/policy.md#no-such-anchor"]
    assert _broken_references('docs/policy.md, "No such section"', here) == ['docs/policy.md, "No such section"']
    assert _broken_references('[x](policy.md) [y](gone.md)', here) == ["](gone.md)"]
