"""The attribute sets in captures.py are verbatim copies of the real captures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .captures import CAPTURED

CAPTURES = Path(__file__).resolve().parents[2] / "research" / "conventions" / "captures"


def test_copies_match_the_capture_files() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"{CAPTURES} is gone; the copies stand on their own")
    for name, entry in CAPTURED.items():
        spans = [s for s in json.loads((CAPTURES / f"{entry['file']}.json").read_text())["spans"] if s["name"] == entry["name"]]
        real = spans[entry["index"]]
        assert real["attributes"] == entry["attributes"], name
        assert real["status"]["code"] == entry["status"], name
