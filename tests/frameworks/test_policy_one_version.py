"""One policy per process (issue 28, defect 2), on all three adapters: a file whose rules
changed under the version in use is refused by reload_policy(), with an error naming the file
and the version, and the guard and the processor installed after it both keep the rules in
use: the guard's would_block and the processor's fall on the same call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

import otel_loopguard  # noqa: E402
from otel_loopguard.errors import PolicyError  # noqa: E402

from .rollout_harness import drive  # noqa: E402,F401

V2 = 'version: "v2"\nrepeat: {warn_at: 2, stop_at: 4}\n'
V2_CHANGED = 'version: "v2"\nrepeat: {warn_at: 2, stop_at: 3}\n'  # other rules, the same version
A12 = ("lookup_order", {"order_id": "A12"})


def test_a_changed_file_under_the_same_version_changes_nothing_anywhere(drive: Any, tmp_path: Path) -> None:
    refused: list[str] = []

    def change_the_file_and_reload() -> None:
        (tmp_path / "policy.yaml").write_text(V2_CHANGED, encoding="utf-8")
        with pytest.raises(PolicyError) as caught:
            otel_loopguard.reload_policy()
        refused.append(str(caught.value))

    try:
        out = drive(V2, [[A12] for _ in range(6)], mode="observe", before=change_the_file_and_reload)
    finally:
        # The sources outlive the test: a file left refused would fail every later reload.
        (tmp_path / "policy.yaml").unlink(missing_ok=True)

    [message] = refused
    assert str(tmp_path / "policy.yaml") in message and "v2" in message and "kept" in message
    guard_blocks = [i for i, d in enumerate([d for d in out.decisions if d[0] != "would_warn"], 4) if d[0] == "would_block"]
    assert guard_blocks[0] == 4  # stop_at 4: the rules in use
    assert out.processor_marks("would_block", "repeat")[0] == 4  # the processor judges by them too
