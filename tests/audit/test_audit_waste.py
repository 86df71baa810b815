"""What a loop cost, as audit reports it from recorded traces of each convention: the model
calls' tokens read from GenAI (`gen_ai.usage.input_tokens`), its older names (Traceloop's
`gen_ai.usage.prompt_tokens`) and OpenInference (`llm.token_count.prompt`), priced by the policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
CONVENTIONS = ["looping_agent_gen_ai.pb", "looping_agent_traceloop.otlp.ndjson", "looping_agent_openinference.otlp.json"]


@pytest.mark.parametrize("name", CONVENTIONS)
def test_every_convention_gives_the_same_waste_priced_by_the_policy(name: str, audit_fast, tmp_path: Path) -> None:
    policy = tmp_path / "priced.yaml"
    policy.write_text('prices:\n  "*": {input: 1000, output: 2000}\n', encoding="utf-8")
    (run,) = json.loads(audit_fast(FIXTURES / name, fmt="json", policy=policy).stdout)["runs"]
    waste = run["waste"]
    # The repeat over calls 1-5 of 6; the four decisions before calls 2-5, 120 + 12 tokens each.
    assert (waste["calls"], waste["model_calls"], waste["input_tokens"], waste["output_tokens"]) == (5, 4, 480, 48)
    assert waste["cost_usd"] == pytest.approx((480 * 1000 + 48 * 2000) / 1e6)
    assert waste["share_calls"] == round(5 / 6, 4) and 0 < waste["share_seconds"] <= 1
    (stop,) = [f for f in run["findings"] if f["severity"] == "stop"]
    assert stop["waste"] == waste  # one loop: the run's waste is its waste
    text = audit_fast(FIXTURES / name, policy=policy).stdout
    assert "cost: 5 calls (83 % of the run)" in text and "4 model calls in between, 528 tokens, $0.576" in text


def test_negative_without_prices_no_cost_is_claimed(audit_fast) -> None:
    (run,) = json.loads(audit_fast(FIXTURES / CONVENTIONS[0], fmt="json").stdout)["runs"]
    assert run["waste"]["tokens"] == 528 and "cost_usd" not in run["waste"]
