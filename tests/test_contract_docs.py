"""docs/contract.md names every public name the code has beyond CONTRACT.md: attributes,
variables, command-line options and public functions. A name added without a line there fails
here, so the contract is extended on purpose, never by accident."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import otel_loopguard
from otel_loopguard import cli

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "otel_loopguard"
CONTRACT = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")


def _in_code(pattern: str) -> list[str]:
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        found |= set(re.findall(pattern, path.read_text(encoding="utf-8")))
    return sorted(found)


ATTRIBUTES = _in_code(r'"(loopguard\.[a-z_.]+)"')
VARIABLES = _in_code(r"\b(OTEL_LOOPGUARD_[A-Z_]+)\b")


def _options() -> list[str]:
    parser = cli._parser()  # noqa: SLF001 - the one parser every command is built on
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    out = []
    for name, command in sub.choices.items():
        for action in command._actions:  # noqa: SLF001
            out += [f"{name} {o}" for o in action.option_strings if o.startswith("--") and o != "--help"]
    return sorted(out)


def test_the_scan_finds_what_it_looks_for() -> None:
    """The lists below are not empty by accident (a broken pattern would pass everything)."""
    assert "loopguard.seq.dense" in ATTRIBUTES and "OTEL_LOOPGUARD_KEY" in VARIABLES
    assert "serve --listen" in _options() and "audit --format" in _options()


@pytest.mark.parametrize("name", ATTRIBUTES)
def test_every_attribute_is_in_the_contract_page(name: str) -> None:
    assert f"`{name}`" in CONTRACT, f"{name}: add it to docs/contract.md"


@pytest.mark.parametrize("name", VARIABLES)
def test_every_variable_is_in_the_extension(name: str) -> None:
    assert f"`{name}`" in CONTRACT, f"{name}: add it to docs/contract.md"


@pytest.mark.parametrize("option", _options())
def test_every_command_line_option_is_named(option: str) -> None:
    flag = option.split(" ", 1)[1]
    assert f"`{flag}`" in CONTRACT, f"otel-loopguard {option}: add it to docs/contract.md"


@pytest.mark.parametrize("name", [n for n in otel_loopguard.__all__ if n != "__version__"])
def test_every_public_function_is_named(name: str) -> None:
    assert f"`otel_loopguard.{name}()`" in CONTRACT
