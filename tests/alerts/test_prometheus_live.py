"""The alert fires in a real Prometheus on a looping run, and stays quiet on a healthy one.

Everything is real and on loopback: `otel-loopguard serve` as a subprocess (`--metrics-listen`,
findings sent to an in-process OTLP sink), an app in this process traced with the OpenTelemetry
SDK, `otel_loopguard.install()` and the OTLP/gRPC exporter (tests/e2e/agents.py), and Debian's
`prometheus` scraping the receiver every second and evaluating alerts/otel-loopguard.rules.yaml
as shipped, every second, with its own data folder (tests/alerts/prometheus.py).

First a healthy run (six `lookup_order` calls with different arguments): once Prometheus has
scraped its completed run and evaluated the rules twice since, no alert is pending or firing,
and every rule evaluated without error. Then a looping run (six calls with the same arguments):
LoopguardToolLoop fires for tool `lookup_order`, kind `repeat`, as /api/v1/alerts shows, and
LoopguardWasteRate for the tool (the receiver's policy prices every model at $3000 per million
tokens, so the model calls in between the loop's calls cost more than the rule's $5), and
only loop alerts fire. The dashboard's queries all run on this Prometheus, and its loop panel
shows the loop. Bounded (about 30 s; each wait at most 60 s); every process is stopped.

Skipped where Debian's prometheus package is missing, and never on CI (CI=true): there it fails.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from e2e.agents import TOOL, run_agents
from live import ReceiverProcess, child_env, free_port, tail, wait_until
from receiver.harness import Sink

from .prometheus import JOB, Prometheus, dashboard_exprs, program, running_prometheus

pytestmark = pytest.mark.real

KEY = "alerts-live-" + secrets.token_hex(16)
CALLS = 6
LOOP_ALERTS = {"LoopguardToolLoop", "LoopguardWasteRate"}
# Every model priced high enough that one loop's decisions cost more than LoopguardWasteRate's $5
# (about 5.9 k tokens between the calls of the looping run: about $17.6).
POLICY = 'prices:\n  "*": {input: 3000, output: 3000}\n'


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    yield s
    s.stop()


@pytest.fixture
def receiver(sink: Sink, tmp_path: Path) -> Iterator[tuple[ReceiverProcess, int]]:
    program("prometheus")  # skips (fails on CI) before anything starts when Prometheus is missing
    metrics_port = free_port()
    env = child_env(lambda k: k.startswith(("OTEL_EXPORTER_OTLP", "OTEL_LOOPGUARD_")), OTEL_LOOPGUARD_KEY=KEY)
    policy = tmp_path / "priced.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    process = ReceiverProcess(["--forward", f"127.0.0.1:{sink.port}", "--root-grace-seconds", "0.5",
                               "--metrics-listen", f"127.0.0.1:{metrics_port}", "--policy", str(policy)],
                              env, tmp_path)
    try:
        yield process.start(), metrics_port
    finally:
        process.stop()


@pytest.fixture
def prometheus(receiver: tuple[ReceiverProcess, int], tmp_path: Path) -> Iterator[Prometheus]:
    with running_prometheus(tmp_path, [f"127.0.0.1:{receiver[1]}"]) as server:
        yield server


def _value(prom: Prometheus, expr: str) -> float:
    result = prom.query(expr)
    return float(result[0]["value"][1]) if result else 0.0


def _evaluated_twice_after(prom: Prometheus, moment: float) -> bool:
    return prom.last_evaluation() > moment + 2.0


def _concrete(expr: str) -> str:
    """A dashboard query as Grafana would send it, its variables filled in."""
    for variable, value in (("$__rate_interval", "1m"), ("$__range", "1h"), ("$job", ".*"), ("$instance", ".*")):
        expr = expr.replace(variable, value)
    return expr


def test_the_loop_alert_fires_on_a_looping_run_and_stays_quiet_on_a_healthy_one(
    sink: Sink, receiver: tuple[ReceiverProcess, int], prometheus: Prometheus, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("no_proxy", "NO_PROXY"):  # the app's OTLP exporter (gRPC) must not go through a proxy
        monkeypatch.setenv(var, "127.0.0.1,localhost")
    process, _ = receiver
    explain = lambda: (f"receiver:\n{tail(process.stderr)}\nprometheus:\n{tail(prometheus.log)}\n"  # noqa: E731
                       f"alerts: {prometheus.alerts()}\nrule groups evaluated at {prometheus.last_evaluation()} (now {time.time()})")
    wait_until(lambda: _value(prometheus, f'up{{job="{JOB}"}}') == 1, 60, "Prometheus never scraped the receiver",
               explain=explain)

    # A healthy run: judged, scraped, the rules evaluated twice since; nothing pending or firing.
    run_agents(process.port, ([{"order_id": f"A{i}"} for i in range(1, CALLS + 1)],), key=KEY,
               resource={"service.name": "loopguard-alerts-agent"})
    wait_until(lambda: _value(prometheus, "otel_loopguard_runs_completed_total") >= 1, 60,
               "Prometheus never saw the healthy run completed", explain=explain)
    seen = time.time()
    wait_until(lambda: _evaluated_twice_after(prometheus, seen), 30, "the rules were not evaluated", explain=explain)
    assert sink.runs() and not sink.findings(), "the healthy run should give a run summary and no finding"
    assert _value(prometheus, "otel_loopguard_spans_received_total") >= 2 * CALLS
    assert prometheus.alerts() == [], explain()
    rules = prometheus.rules()
    assert len(rules) == 16 and all(rule["health"] == "ok" for rule in rules), rules
    assert _value(prometheus, "sum(otel_loopguard_loop_wasted_cost_usd_total)") == 0

    # A looping run: LoopguardToolLoop fires for the tool and the kind, and only loop alerts fire.
    run_agents(process.port, ([{"order_id": "A12"}] * CALLS,), key=KEY,
               resource={"service.name": "loopguard-alerts-agent"})

    def firing(name: str) -> list[dict[str, Any]]:
        return [a for a in prometheus.alerts() if a["state"] == "firing" and a["labels"]["alertname"] == name
                and a["labels"].get("tool") == TOOL and a["labels"].get("kind", "repeat") == "repeat"]

    (alert,) = wait_until(lambda: firing("LoopguardToolLoop"), 60, "LoopguardToolLoop never fired on the looping run",
                          explain=explain)
    assert alert["labels"]["severity"] == "warning" and alert["labels"]["job"] == JOB
    assert alert["annotations"]["summary"] == f"Agent loop on tool {TOOL} (repeat)"
    assert alert["annotations"]["runbook"] == "docs/alerts.md#loopguardtoolloop"
    assert float(alert["value"]) >= 1
    assert any(f.name.startswith("loopguard.finding") for f in sink.findings())
    # What the loop cost fires its own alert: the decisions in between, priced by the policy.
    (waste,) = wait_until(lambda: firing("LoopguardWasteRate"), 60, "LoopguardWasteRate never fired on the loop",
                          explain=explain)
    assert waste["labels"]["severity"] == "warning" and "kind" not in waste["labels"]
    assert waste["annotations"]["runbook"] == "docs/alerts.md#loopguardwasterate"
    assert float(waste["value"]) > 5
    assert _value(prometheus, f'sum(otel_loopguard_loop_wasted_calls_total{{tool="{TOOL}"}})') >= 5
    assert {a["labels"]["alertname"] for a in prometheus.alerts()} <= LOOP_ALERTS, explain()
    assert all(rule["health"] == "ok" for rule in prometheus.rules())

    # The dashboard's queries run here; its loop panel shows the loop by tool and kind.
    for expr in dashboard_exprs():
        prometheus.query(_concrete(expr))  # fails the test on a query Prometheus refuses
    (loop_panel,) = [e for e in dashboard_exprs() if e.startswith("sum by (tool, kind)")]
    shown = prometheus.query(_concrete(loop_panel))
    assert any(s["metric"].get("tool") == TOOL and s["metric"].get("kind") == "repeat" and float(s["value"][1]) > 0
               for s in shown), shown

    assert process.stop() == 0, tail(process.stderr)
    assert prometheus.stop() == 0, tail(prometheus.log)
