"""The docs' `otel-loopguard serve` examples bind loopback unless they turn on TLS and a token,
and every receiver setting is in docs/receiver.md's settings table.

collector_config/ is covered too: its commands are what users copy next to a Collector.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import fields
from pathlib import Path

import pytest

from otel_loopguard.receiver.config import ReceiverConfig, is_loopback

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
           *sorted((ROOT / "collector_config").glob("*.yaml")), *sorted((ROOT / "collector_config").glob("*.md"))]
_SERVE = re.compile(r"((?:[A-Z_]+=\S+\s+)*otel-loopguard serve\b[^\n`]*)")


def _commands(text: str) -> list[list[str]]:
    text = re.sub(r"\\\n\s*", " ", text)  # shell line continuations
    out = []
    for m in _SERVE.finditer(text):
        try:
            out.append(shlex.split(m.group(1)))
        except ValueError:  # prose quoting a fragment, not a command
            continue
    return out


def _loopback(address: str) -> bool:
    return is_loopback(address.rpartition(":")[0].strip("[]"))


def _open_listens(words: list[str]) -> list[str]:
    """--listen / --metrics-listen addresses that are not loopback (a synopsis' HOST:PORT is none)."""
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--listen", "--metrics-listen")
            and re.fullmatch(r".+:[0-9]+", words[i + 1]) and not _loopback(words[i + 1])]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_serve_examples_bind_loopback_unless_tls_and_a_token_are_on(path: Path) -> None:
    for words in _commands(path.read_text(encoding="utf-8")):
        if not _open_listens(words):
            continue
        tls = "--tls-cert-file" in words and "--tls-key-file" in words
        token = "--auth-token-file" in words or any(w.startswith("OTEL_LOOPGUARD_AUTH_TOKENS=") for w in words)
        assert tls and token, f"{path.name}: binds {_open_listens(words)} without TLS and a token: {' '.join(words)}"


def test_the_rule_catches_an_open_example() -> None:
    (words,) = _commands("run `otel-loopguard serve --listen 0.0.0.0:4327 --forward b:4317`")
    assert _open_listens(words) == ["0.0.0.0:4327"]
    (words,) = _commands("otel-loopguard serve --listen [::1]:4327 \\\n  --metrics-listen 10.0.0.1:9464\n")
    assert _open_listens(words) == ["10.0.0.1:9464"]


def test_every_receiver_setting_is_in_the_settings_table() -> None:
    text = (ROOT / "docs" / "receiver.md").read_text(encoding="utf-8")
    table = text.split("## Settings", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)`", table))
    missing = [f.name for f in fields(ReceiverConfig) if f.name not in documented]
    assert missing == []
