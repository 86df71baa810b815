"""What the audit makes of a mixed rollout where nothing was denied (issue 28, defect 4), on
all three adapters: the observe-only tool's loop carries the guard's `would_block` events on
calls that ran; they are observe-mode records, not guard decisions (docs/scoring.md)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from .rollout_harness import drive  # noqa: E402,F401

MIXED = "version: mixed-1\ntools:\n  search_cases: {enforce: false}\n"
SEARCH = ("search_cases", {"query": "late delivery A12"})


def test_would_block_in_a_mixed_rollout_is_no_guard_decision(drive: Any) -> None:
    out = drive(MIXED, [[SEARCH] for _ in range(6)] + [[("lookup_order", {"order_id": "A12"})]])
    assert out.denied() == [] and out.count("search_cases") == 6
    assert [d[0] for d in out.decisions if d[0] != "would_warn"] == ["would_block"] * 3  # searches 5, 6, the lookup

    score = out.audit()["score"]
    assert score["tool_calls"] == 7
    assert (score["guard_fired"], score["guard_seq"], score["guard_before_dispatch"]) == (False, None, None)
    assert score["executed_after_guard"] is False
    violations = [v.split(":")[0] for v in score["release"]["violations"]]
    assert "executed_after_guard" not in violations and "guard_after_dispatch" not in violations
    assert "uncontained_loop" in violations  # the loop was observed, not contained: the truth


def test_negative_control_an_enforced_denial_is_the_guard_decision(drive: Any) -> None:
    out = drive(MIXED, [[("lookup_order", {"order_id": "A12"})] for _ in range(6)])
    assert out.denied() == [5, 6]

    score = out.audit()["score"]
    assert (score["guard_fired"], score["guard_seq"], score["guard_before_dispatch"]) == (True, 5, True)
    assert score["executed_after_guard"] is False
