"""Seed 001's scripted loop tests, run with the `seed-001` preset through the guard and
through `otel-loopguard audit`, asserting the article's turn numbers.

The agent loop below has the article's shape: a scripted model turn (its tokens priced by
the guard), then its tool call. The guard is asked before the call (a denied call never
runs: the fake tools count their own invocations) and told the result after it; as in the
article, a stop-level finding on that result ends the run there (caps excepted: a cap is
checked before the call). Where the article's guard checks after a call has run, ours
denies that call before it runs, at the same turn: the repeat's 5th and the ping-pong's 6th
call never execute.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
import yaml

from otel_loopguard.audit import audit
from otel_loopguard.enforce import Guard
from otel_loopguard.findings import STOP
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import load_policy, policy_from_mapping
from otel_loopguard.policy.load import preset_path

KEY = "seed-001-tests-key-0123456789abcdef"


@dataclass
class Turn:
    calls: list[tuple[str, dict]]
    in_tok: int = 1000
    out_tok: int = 50


@dataclass
class Outcome:
    status: str  # done | stopped
    reason: str = ""
    turns: int = 0
    records: list[dict] = field(default_factory=list)  # the run as NDJSON records (docs/audit.md)


def call_turn(i: int, name: str = "search", args: Optional[dict] = None, in_tok: int = 1000) -> Turn:
    return Turn([(name, args or {"q": "x"})], in_tok)


def preset(**tools: dict) -> Any:
    """The seed-001 preset, with the per-tool limits a test adds (the article's Limits(per_tool=...))."""
    if not tools:
        return load_policy("seed-001")
    data = yaml.safe_load(preset_path("seed-001").read_text(encoding="utf-8"))  # type: ignore[union-attr]
    return policy_from_mapping({**data, "tools": tools})


def run_agent(turns: list[Turn], tools: dict[str, Callable[..., Any]], policy: Any, run: str = "r") -> Outcome:
    guard = Guard(Fingerprinter(load_key(key=KEY), policy))
    out = Outcome("done")
    for t, turn in enumerate(turns, start=1):
        out.turns = t
        out.records.append({"record": "model", "run_id": run, "turn": t, "input_tokens": turn.in_tok,
                            "output_tokens": turn.out_tok})
        stop = _first_stop(guard.record_model(run_id=run, turn=t, input_tokens=turn.in_tok, output_tokens=turn.out_tok))
        if stop or not turn.calls:
            return _ended(out, run, stop)
        for name, args in turn.calls:
            record = {"run_id": run, "sequence": len([r for r in out.records if "sequence" in r]) + 1,
                      "call_id": f"c{t}", "turn": t, "tool": name, "arguments": args}
            decision = guard.check(name, args, run_id=run, turn=t)
            if decision.denied:
                out.records.append({**record, "observation": decision.message, "ok": False, "dispatched": False,
                                    "guard": decision.kind})
                return _ended(out, run, decision.kind)
            ok, result = _safe_call(tools, name, args)
            out.records.append({**record, "observation": result, "ok": ok})
            guard.record(decision, result, ok, run_id=run)
            stop = _first_stop([f for f in guard.findings(run) if f.kind != "tool_cap"])
            if stop:
                return _ended(out, run, stop)
    return out


def _first_stop(findings: list) -> Optional[str]:
    return next((f.kind for f in findings if f.severity == STOP), None)


def _ended(out: Outcome, run: str, stop: Optional[str]) -> Outcome:
    if stop:
        out.status, out.reason = "stopped", stop
    out.records.append({"record": "run", "run_id": run, "terminal_response": True,
                        "termination_reason": "loop_guard" if stop else "final_answer"})
    return out


def _safe_call(tools: dict[str, Callable[..., Any]], name: str, args: dict) -> tuple[bool, Any]:
    try:
        return True, str(tools[name](**args))
    except Exception as exc:  # errors go back to the model as data, as in the article
        return False, f"{type(exc).__name__}: {exc}"


def counting(result: Callable[[], Any]) -> tuple[Callable[..., Any], list]:
    invoked: list = []

    def tool(**kwargs: Any) -> Any:
        invoked.append(kwargs)
        return result()
    return tool, invoked


# --- the article's scripted tests, through the guard -------------------------------------------


def test_healthy_run_finishes() -> None:
    search, invoked = counting(lambda: "found it")
    out = run_agent([call_turn(1), Turn([])], {"search": search}, preset())
    assert (out.status, out.turns, len(invoked)) == ("done", 2, 1)


def test_exact_repeat_is_stopped_at_turn_5() -> None:
    search, invoked = counting(lambda: "no new info")
    out = run_agent([call_turn(i) for i in range(20)], {"search": search}, preset())
    assert (out.status, out.reason, out.turns) == ("stopped", "repeat", 5)
    assert len(invoked) == 4  # the 5th identical call was denied before it ran


def test_ping_pong_is_stopped_at_turn_6() -> None:
    counter = itertools.count()
    read, reads = counting(lambda: next(counter))
    write, writes = counting(lambda: next(counter))
    turns = [call_turn(i, "read" if i % 2 == 0 else "write") for i in range(20)]
    out = run_agent(turns, {"read": read, "write": write}, preset())
    assert (out.reason, out.turns) == ("cycle", 6)
    assert (len(reads), len(writes)) == (3, 2)  # the 6th call (a write) never ran


def test_ping_pong_with_changing_results_is_work_under_the_default_results_rule() -> None:
    counter = itertools.count()
    read, _ = counting(lambda: next(counter))
    write, _ = counting(lambda: next(counter))
    turns = [call_turn(i, "read" if i % 2 == 0 else "write") for i in range(20)]
    data = yaml.safe_load(preset_path("seed-001").read_text(encoding="utf-8"))  # type: ignore[union-attr]
    out = run_agent(turns, {"read": read, "write": write}, policy_from_mapping({**data, "cycle": {"compare": "results"}}))
    assert out.reason != "cycle"  # negative control: comparing actions is what stops it


def test_error_streak_is_stopped_at_the_4th_failure() -> None:
    def broken(**kwargs: Any) -> Any:
        raise ValueError("bad input")
    out = run_agent([call_turn(i, "parse", {"n": i}) for i in range(20)], {"parse": broken}, preset())
    assert (out.reason, out.turns) == ("error_streak", 4)


def test_error_streak_of_alternating_tools_is_no_same_tool_streak() -> None:
    def broken(**kwargs: Any) -> Any:
        raise ValueError("bad input")
    turns = [call_turn(i, "parse" if i % 2 else "load", {"n": i}) for i in range(8)]
    out = run_agent(turns, {"parse": broken, "load": broken}, preset())
    assert out.reason != "error_streak"  # same_tool: each tool failed at most once in a row


def test_cost_budget_is_stopped_at_turn_1() -> None:
    search, invoked = counting(lambda: "ok")
    turns = [call_turn(1, in_tok=1_000_000)] + [call_turn(2, args={"q": "y"})] * 5
    out = run_agent(turns, {"search": search}, preset())
    assert (out.reason, out.turns) == ("budget", 1)
    assert invoked == []  # the spend is known before the call: it never ran


def test_per_tool_limit_blocks_the_third_call() -> None:
    counter = itertools.count()
    search, invoked = counting(lambda: next(counter))
    out = run_agent([call_turn(i, args={"q": i}) for i in range(10)], {"search": search},
                    preset(search={"max_calls": 2}))
    assert (out.reason, out.turns, len(invoked)) == ("tool_cap", 3, 2)


def test_stale_results_stop_at_the_6th_call_with_nothing_new() -> None:
    search, invoked = counting(lambda: "no matches")
    out = run_agent([call_turn(i, args={"q": f"variant {i}"}) for i in range(20)], {"search": search}, preset())
    assert (out.reason, out.turns, len(invoked)) == ("no_progress", 7, 7)  # call 1 new, 2..7 nothing new


# --- the same scripts through `otel-loopguard audit --policy seed-001` --------------------------


def _audit(tmp_path: Path, records: list[dict], policy: str | Path = "seed-001") -> Any:
    path = tmp_path / "run.ndjson"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    import os
    from unittest import mock
    with mock.patch.dict(os.environ, {"OTEL_LOOPGUARD_KEY": KEY}):
        (report,) = audit([path], policy)  # type: ignore[arg-type]
    return report


def _as_article_ran(out: Outcome) -> list[dict]:
    """The article's loop checks after a call runs: its trace holds the stopping call too."""
    return [{k: v for k, v in r.items() if k not in ("dispatched", "guard")} | ({"ok": True, "observation": "x"}
            if r.get("dispatched") is False else {}) for r in out.records]


@pytest.mark.parametrize(
    "script,kind,turn",
    [
        ("repeat", "repeat", 5),
        ("ping_pong", "cycle", 6),
        ("error_streak", "error_streak", 4),
        ("stale", "no_progress", 7),
    ],
)
def test_audit_of_the_article_trace_stops_at_the_articles_turn(tmp_path: Path, script: str, kind: str, turn: int) -> None:
    out = SCRIPTS[script]()
    report = _audit(tmp_path, _as_article_ran(out))
    stops = [f for f in report.findings if f.severity == STOP]
    assert (stops[0].kind, stops[0].last_seq) == (kind, turn)
    assert report.score["first_stop_seq"] == turn


@pytest.mark.parametrize("script", ["repeat", "ping_pong", "per_tool"])
def test_audit_of_the_guarded_run_passes_the_release_rule(tmp_path: Path, script: str) -> None:
    out = SCRIPTS[script]()
    policy: str | Path = "seed-001"
    if script == "per_tool":
        policy = tmp_path / "per-tool.yaml"
        data = yaml.safe_load(preset_path("seed-001").read_text(encoding="utf-8"))  # type: ignore[union-attr]
        policy.write_text(yaml.safe_dump({**data, "tools": {"search": {"max_calls": 2}}}), encoding="utf-8")
    report = _audit(tmp_path, out.records, policy)
    assert report.score["guard_seq"] == out.turns and report.score["guard_before_dispatch"] is True
    assert report.score["release"] == {"passed": True, "violations": []}


def test_audit_of_the_cost_script_finds_the_budget_at_turn_1(tmp_path: Path) -> None:
    records = _as_article_ran(SCRIPTS["cost"]())
    records.insert(1, {"run_id": "r", "sequence": 1, "call_id": "c1", "turn": 1, "tool": "search",
                       "arguments": {"q": "x"}, "observation": "ok"})  # the article's call 1 ran
    report = _audit(tmp_path, records)
    assert [(f.kind, f.severity) for f in report.findings if f.severity == STOP] == [("budget", STOP)]
    assert "USD" in next(f.reason for f in report.findings if f.kind == "budget")


def test_audit_of_the_healthy_script_has_no_findings(tmp_path: Path) -> None:
    report = _audit(tmp_path, SCRIPTS["healthy"]().records)
    assert report.findings == [] and report.passed is True


def _script_ping_pong() -> Outcome:
    counter = itertools.count()
    tools = {"read": lambda **k: next(counter), "write": lambda **k: next(counter)}
    return run_agent([call_turn(i, "read" if i % 2 == 0 else "write") for i in range(20)], tools, preset())


def _script_error_streak() -> Outcome:
    def broken(**kwargs: Any) -> Any:
        raise ValueError("bad input")
    return run_agent([call_turn(i, "parse", {"n": i}) for i in range(20)], {"parse": broken}, preset())


def _script_per_tool() -> Outcome:
    counter = itertools.count()
    return run_agent([call_turn(i, args={"q": i}) for i in range(10)], {"search": lambda **k: next(counter)},
                     preset(search={"max_calls": 2}))


SCRIPTS: dict[str, Callable[[], Outcome]] = {
    "healthy": lambda: run_agent([call_turn(1), Turn([])], {"search": lambda **k: "found it"}, preset()),
    "repeat": lambda: run_agent([call_turn(i) for i in range(20)], {"search": lambda **k: "no new info"}, preset()),
    "ping_pong": _script_ping_pong,
    "error_streak": _script_error_streak,
    "cost": lambda: run_agent([call_turn(1, in_tok=1_000_000)] + [call_turn(2, args={"q": "y"})] * 5,
                              {"search": lambda **k: "ok"}, preset()),
    "per_tool": _script_per_tool,
    "stale": lambda: run_agent([call_turn(i, args={"q": f"variant {i}"}) for i in range(20)],
                               {"search": lambda **k: "no matches"}, preset()),
}
