"""The `seed-001` preset's repeat reason on all three adapters (issue 28, defect 6): calls that
alternated with another tool and returned new content are denied for being the same call 5
times within the window, and the model is told so, not "in a row ... no progress"."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from otel_loopguard.policy.load import preset_path  # noqa: E402

from .rollout_harness import drive  # noqa: E402,F401


def test_the_denial_says_within_the_window_whatever_they_returned(drive: Any) -> None:
    counter = iter(range(1000))

    def behave(tool: str, args: dict) -> Any:
        return {"status": f"step {next(counter)}"} if tool == "lookup_order" else {"cases": [args["query"]]}

    turns = [[("lookup_order", {"order_id": "A12"})] if t % 2 == 0 else [("search_cases", {"query": f"q{t}"})]
             for t in range(10)]
    out = drive(preset_path("seed-001").read_text(encoding="utf-8"), turns, behave=behave)

    assert out.denied() == [9, 10]  # the 5th lookup of A12, then the run is stopped
    assert ("lookup_order would be called 5 times within 20 decisions with the same arguments, whatever they "
            "returned") in out.outputs[8]
    assert "in a row" not in out.outputs[8] and "no progress" not in out.outputs[8]
