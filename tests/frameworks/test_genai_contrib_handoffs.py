"""The processor tags and judges handoffs under the OTel-contrib GenAI instrumentation (issue 20).

Its `agent_handoff` spans name both agents when they end (`gen_ai.handoff.from_agent` /
`to_agent`). The instrumentation needs its own virtualenv (.venv-genai): each case is one run
of genai_contrib_handoffs.py there.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENAI_PYTHON = ROOT / ".venv-genai" / "bin" / "python"
SCRIPT = Path(__file__).resolve().with_name("genai_contrib_handoffs.py")

if not GENAI_PYTHON.exists():
    pytest.skip(f"{GENAI_PYTHON.relative_to(ROOT)} not found: create it with "
                "`VENV=.venv-genai bash scripts/setup.sh genai_contrib` (scripts/test.sh does)",
                allow_module_level=True)


def _tagged(handoffs: int) -> list[dict[str, Any]]:
    env = {"PATH": "", "OPENAI_API_KEY": "sk-dummy-no-network", "TRACELOOP_METRICS_ENABLED": "false"}
    done = subprocess.run([str(GENAI_PYTHON), str(SCRIPT), str(handoffs)], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_a_handoff_ping_pong_is_numbered_and_stops_at_the_sixth_handoff() -> None:
    tagged = _tagged(8)
    assert [t["seq"] for t in tagged] == list(range(1, 9))
    assert [t["tool"] for t in tagged] == ["handoff(TriageAgent -> BillingAgent)",
                                           "handoff(BillingAgent -> TriageAgent)"] * 4
    assert len({t["digest"] for t in tagged}) == 2
    first_stop = next(t["seq"] for t in tagged if any(sev == "stop" for _, sev in t["decisions"]))
    assert first_stop == 6


def test_a_single_handoff_is_tagged_and_raises_nothing() -> None:
    tagged = _tagged(1)
    assert [(t["seq"], t["tool"], t["decisions"]) for t in tagged] == [(1, "handoff(TriageAgent -> BillingAgent)", [])]
