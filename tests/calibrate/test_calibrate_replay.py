"""What blocking would do, per run and per tool: where it stops, what it saves, caps, and the
decisions recorded in observe mode read back (a fresh recording through the real SDK and
processor, as scripts/record_observed_example.py makes the bundled one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_loopguard.calibrate.calibration import Result
from otel_loopguard.calibrate.command import run_calibration
from otel_loopguard.calibrate.replay import RUN_LEVEL

from calibrate_helpers import EXAMPLES, OBSERVED, RUN_ATTR, load_script

LOOP = EXAMPLES / "looping_agent.ndjson"  # support-order-A12: one lookup, six times, one answer
HEALTHY = EXAMPLES / "healthy_pagination.ndjson"


def _by_name(files: list[Path], sweeps: list[str], run_attr: str | None = None) -> dict[str, Result]:
    return {r.name: r for r in run_calibration(files, sweeps, run_id_attribute=run_attr).results}


def _run(result: Result, run_id: str):  # type: ignore[no-untyped-def]
    return next(r for r in result.runs if r.run_id == run_id)


@pytest.mark.parametrize("stop_at", [2, 3, 4, 5, 6])
def test_a_repeat_limit_denies_the_call_that_reaches_it_and_saves_the_rest(stop_at: int) -> None:
    result = _by_name([LOOP], [f"repeat.stop_at={stop_at}"])[f"repeat.stop_at={stop_at}"]
    stop = _run(result, "support-order-A12").stop
    assert stop is not None and (stop.tool, stop.kind, stop.seq) == ("lookup_order", "repeat", stop_at)
    assert stop.calls_saved == 6 - stop_at + 1  # the denied call and every later one


def test_a_limit_beyond_the_loop_stops_nothing_and_a_healthy_run_never_stops() -> None:
    results = _by_name([LOOP, HEALTHY], ["repeat.stop_at=2..9", "no_progress.stop_at=2..9"])
    assert _run(results["repeat.stop_at=9"], "support-order-A12").stop is None or \
        _run(results["repeat.stop_at=9"], "support-order-A12").stop.kind != "repeat"
    for result in results.values():  # negative control: pages bring new items, polls new states
        assert _run(result, "search-refunds").stop is None, result.name
        assert _run(result, "search-refunds").passed is True, result.name


def test_lower_limits_stop_no_fewer_runs_and_no_later() -> None:
    """Monotone: tightening a threshold can only stop more runs, earlier."""
    results = _by_name([OBSERVED, LOOP, HEALTHY], ["repeat.stop_at=2..9"], RUN_ATTR)
    previous: dict[str, int] = {}
    for k in range(9, 1, -1):
        stops = {r.run_id: r.stop.seq for r in results[f"repeat.stop_at={k}"].runs if r.stop and r.stop.seq}
        for run_id, seq in previous.items():
            assert run_id in stops and stops[run_id] <= seq, (k, run_id)
        previous = stops


def test_a_tool_cap_denies_that_tools_later_calls_only() -> None:
    results = _by_name([OBSERVED], ["tools.search_cases.max_calls=5"], RUN_ATTR)
    capped = results["tools.search_cases.max_calls=5"]
    triage = _run(capped, "triage-topics")  # twelve distinct searches
    assert triage.stop is None  # the run goes on
    assert triage.caps["search_cases"].seq == 6 and triage.caps["search_cases"].calls_saved == 7
    row = capped.tools["search_cases"]
    assert sorted(rid for rid, _ in row.stops) == ["refund-search", "triage-topics"]
    assert row.newly_stopped == ["refund-search", "triage-topics"]
    assert "lookup_order" in capped.tools and [rid for rid, _ in capped.tools["lookup_order"].stops] == ["support-A12"]


def test_savings_count_later_model_tokens() -> None:
    current = _by_name([OBSERVED], [], RUN_ATTR)["current"]
    stop = _run(current, "support-A12").stop  # seven identical lookups, one model decision each
    assert stop is not None and stop.seq == 5 and stop.calls_saved == 3
    assert stop.tokens_saved == 2 * 1260  # the decisions after the denied call's: turns 6 and 7
    assert stop.cost_saved_usd is None  # the policy prices no model


def test_a_turn_budget_denies_the_next_turns_first_call() -> None:
    result = _by_name([OBSERVED], ["budget.max_turns=3"], RUN_ATTR)["budget.max_turns=3"]
    triage = _run(result, "triage-topics")
    assert triage.stop is not None and triage.stop.kind == "budget" and triage.stop.seq == 4
    assert result.tools[triage.stop.tool]


def test_recorded_decisions_say_what_blocking_would_have_done(tmp_path: Path) -> None:
    """A fresh observe-mode recording: its would_block marks stop the runs where the replayed
    current policy stops them, with no re-run of the agents."""
    out = tmp_path / "observed.otlp.json"
    assert load_script("record_observed_example").main([str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert '"would_block"' in text and '"would_warn"' in text
    cal = run_calibration([out], [], run_id_attribute=RUN_ATTR)
    assert cal.recorded is not None
    recorded = {r.run_id: (r.stop.tool, r.stop.seq) if r.stop else None for r in cal.recorded.runs}
    replayed = {r.run_id: (r.stop.tool, r.stop.seq) if r.stop else None for r in cal.results[0].runs}
    assert recorded == replayed == {"support-A12": ("lookup_order", 5), "export-poller": ("get_export_status", 7),
                                    "refund-search": None, "triage-topics": None}
    assert "search_cases" in {t for r in cal.recorded.runs for t in r.warned}


def test_recorded_decisions_missing_means_no_recorded_column() -> None:
    cal = run_calibration([HEALTHY, LOOP], [])
    assert cal.recorded is None  # negative control: nothing recorded, nothing claimed


def test_an_enforced_denial_is_read_as_the_recorded_stop() -> None:
    cal = run_calibration([EXAMPLES / "guarded_run.ndjson"], [])
    assert cal.recorded is not None
    stop = cal.recorded.runs[0].stop
    assert stop is not None and (stop.seq, stop.kind, stop.calls_saved) == (3, "repeat", 0)  # it never ran


def test_run_level_findings_without_a_tool_land_on_the_tool_that_crossed() -> None:
    result = _by_name([LOOP], ["repeat.stop_at=9"])["repeat.stop_at=9"]
    stop = _run(result, "support-order-A12").stop  # no_progress stops it instead (no tool of its own)
    assert stop is None or stop.tool == "lookup_order"
    assert RUN_LEVEL not in result.tools


def test_the_json_document_lists_every_candidate_tool_and_run() -> None:
    from otel_loopguard.calibrate.report import as_document

    cal = run_calibration([OBSERVED], ["repeat.stop_at=4,6"], run_id_attribute=RUN_ATTR)
    doc = json.loads(json.dumps(as_document(cal)))
    assert doc["schema"] == "otel-loopguard.calibrate/1"
    assert [c["name"] for c in doc["candidates"]] == ["current", "repeat.stop_at=4", "repeat.stop_at=6"]
    assert set(doc["tools"]) == {"lookup_order", "search_cases", "get_export_status"}
    four = doc["candidates"][1]
    assert four["verdict_flips"] == {"to_fail": ["refund-search"], "to_pass": []}
    row = next(t for t in four["tools"] if t["tool"] == "search_cases")
    assert row["newly_stopped"] == ["refund-search"] and row["stop_runs"][0]["seq"] == 7
    assert doc["recorded"]["name"] == "recorded" and "verdicts" not in doc["recorded"]


def test_savings_are_priced_where_the_policy_prices_the_model(tmp_path: Path) -> None:
    policy = tmp_path / "priced.yaml"
    policy.write_text("prices:\n  scripted-model: {input: 1.0, output: 2.0}\n", encoding="utf-8")
    cal = run_calibration([OBSERVED], [], policy, run_id_attribute=RUN_ATTR)
    stop = _run(cal.results[0], "support-A12").stop
    assert stop is not None and stop.cost_saved_usd == pytest.approx(2 * (1200 * 1.0 + 60 * 2.0) / 1e6)
    assert cal.results[0].tools["lookup_order"].priced() == pytest.approx(stop.cost_saved_usd)


def test_a_large_html_report_draws_the_runs_that_matter_first() -> None:
    from otel_loopguard.calibrate import html

    cal = run_calibration([HEALTHY, LOOP, EXAMPLES / "guarded_run.ndjson"], ["repeat.stop_at=3"])
    old = html.MAX_RUNS_DRAWN
    try:
        html.MAX_RUNS_DRAWN = 1
        page = html.to_html(cal)
    finally:
        html.MAX_RUNS_DRAWN = old
    assert page.count('<svg class="timeline"') == 1 and 'data-run="support-order-A12"' in page
    assert "2 more runs not drawn" in page
