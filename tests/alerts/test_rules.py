"""alerts/: the Prometheus rules and the Grafana dashboard, checked against what the receiver exports.

Without a process: every metric and label the rules and the dashboard name is one the receiver
really exports (otel_loopguard/receiver/ops/metrics.py, and the labels its counters are given), the
waste alert reads the `loop_wasted_*` counters, every alert has a unit test that fires it
and one where it stays quiet, and a section in docs/alerts.md.
With Debian's promtool (marked real): `promtool check rules` passes, the unit tests
(tests/alerts/otel-loopguard.rules.test.yaml) pass, and fail when a rule is broken.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from live import ROOT
from otel_loopguard.receiver.ops.metrics import HELP, PREFIX

from .prometheus import DASHBOARD, RULES, UNIT_TESTS, dashboard_exprs, promtool

TARGET_LABELS = {"job", "instance"}  # what Prometheus adds to every scraped series
PROMETHEUS_OWN = {"up", "ALERTS"}  # series Prometheus itself makes
SELECTOR = re.compile(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?")
LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
KEYWORDS = {
    "sum", "by", "without", "or", "and", "unless", "increase", "rate", "offset", "count", "vector",
    "sort_desc", "on", "ignoring", "bool", "label_values",
}


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"] for rule in group["rules"]]


def alert_names() -> list[str]:
    return [rule["alert"] for rule in rules() if "alert" in rule]


def exported_labels() -> dict[str, set[str]]:
    """Metric name -> the labels the receiver's code gives it (`metrics.inc("name", label=...)`)."""
    labels: dict[str, set[str]] = {name: set() for name in HELP}
    for path in (ROOT / "otel_loopguard").rglob("*.py"):
        for name, rest in re.findall(r'\.inc\(\s*f?"([\w{}]+)"([^)\n]*)\)', path.read_text(encoding="utf-8")):
            # An f-string name (`f"loop_wasted_{name}_total"`) stands for every name it can make.
            pattern = re.compile(re.sub(r"\\\{\w+\\\}", r"\\w+", re.escape(name)))
            for known in labels:
                if pattern.fullmatch(known):
                    labels[known] |= set(re.findall(r"\b(\w+)=", rest))
    return labels


def unknown_names(expr: str, exported: dict[str, set[str]]) -> list[str]:
    """Series and labels an expression names that the receiver (or Prometheus) does not export."""
    wrong: list[str] = []
    text = re.sub(r"\$\w+", "1m", re.sub(r'"[^"]*"', '""', expr))  # label values and Grafana's variables are not names
    grouping = {label.strip() for group in GROUPING.findall(text) for label in group.split(",") if label.strip()}
    allowed_grouping = set(TARGET_LABELS)
    for name, braces in SELECTOR.findall(re.sub(r"\[[^\]]*\]", "", GROUPING.sub(" ", text))):
        if name in KEYWORDS or name in PROMETHEUS_OWN or re.fullmatch(r"\d+\w*", name):
            allowed_grouping |= {"alertname", "alertstate"} if name == "ALERTS" else set()
            continue
        short = name[len(PREFIX):] if name.startswith(PREFIX) else None
        if short not in exported:
            wrong.append(name)
            continue
        allowed = TARGET_LABELS | exported[short]
        allowed_grouping |= allowed
        wrong += [f"{name}{{{label}}}" for label in LABEL.findall(braces or "") if label not in allowed]
    wrong += [f"by ({label})" for label in sorted(grouping - allowed_grouping)]
    return wrong


def test_the_rules_and_the_dashboard_name_only_metrics_and_labels_the_receiver_exports() -> None:
    exported = exported_labels()
    assert exported["findings_total"] == {"kind", "tool", "severity"} and exported["reload_failures_total"] == {"setting"}
    assert all(exported[f"loop_wasted_{n}_total"] == {"kind", "tool"} for n in ("calls", "seconds", "tokens", "cost_usd"))
    exprs = [rule["expr"] for rule in rules()] + dashboard_exprs()
    assert len(exprs) > 30
    wrong = {expr: unknown_names(expr, exported) for expr in exprs}
    assert {e: w for e, w in wrong.items() if w} == {}
    # Negative controls: a metric the receiver does not export, a label it does not give, a grouping by one.
    assert unknown_names("increase(otel_loopguard_loop_wasted_dollars_total[1h]) > 5", exported) == [
        "otel_loopguard_loop_wasted_dollars_total"]
    assert unknown_names('otel_loopguard_backpressure_total{tool="x"}', exported) == [
        "otel_loopguard_backpressure_total{tool}"]
    assert unknown_names("sum by (severity) (otel_loopguard_loop_wasted_calls_total)", exported) == ["by (severity)"]
    assert unknown_names("sum by (severity) (otel_loopguard_findings_total)", exported) == []


def test_the_waste_alert_is_active_on_the_cost_the_receiver_exports() -> None:
    (waste,) = [rule for rule in rules() if rule.get("alert") == "LoopguardWasteRate"]
    assert "otel_loopguard_loop_wasted_cost_usd_total" in waste["expr"]
    assert "loop_wasted_cost_usd_total" in HELP
    assert "# - alert:" not in RULES.read_text(encoding="utf-8")  # no placeholder left


def test_alerts_on_findings_total_sum_its_severity_away() -> None:
    """The counter's `severity` label and the alert's own `severity` label would clash (a warn
    and a stop series would become one labelset): every alert on it sums the label away."""
    for rule in rules():
        if "alert" in rule and "otel_loopguard_findings_total" in rule["expr"]:
            assert re.search(r"sum (without \(severity\)|by \()", rule["expr"]), rule["alert"]


def test_every_alert_has_a_unit_test_that_fires_it_and_one_where_it_stays_quiet() -> None:
    cases = [case for test in yaml.safe_load(UNIT_TESTS.read_text(encoding="utf-8"))["tests"]
             for case in test.get("alert_rule_test", [])]
    fires = {case["alertname"] for case in cases if case.get("exp_alerts")}
    quiet = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    names = alert_names()
    assert len(names) == len(set(names)) >= 15
    assert sorted(set(names) - fires) == [] and sorted(set(names) - quiet) == []
    assert sorted((fires | quiet) - set(names)) == []


def test_every_alert_is_explained_in_docs_alerts_md_and_links_there() -> None:
    docs = (ROOT / "docs" / "alerts.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### (\w+)$", docs, re.MULTILINE))
    for rule in rules():
        if "alert" not in rule:
            continue
        name = rule["alert"]
        assert name in headings, f"docs/alerts.md has no '### {name}'"
        assert rule["annotations"]["runbook"] == f"docs/alerts.md#{name.lower()}"
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert {"summary", "description"} <= set(rule["annotations"])
    assert "docs/alerts.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_rule_groups_leave_the_evaluation_interval_to_prometheus() -> None:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    assert [g["name"] for g in groups] == ["otel-loopguard.loops", "otel-loopguard.receiver"]
    assert all("interval" not in g for g in groups)


def test_the_dashboard_reads_prometheus_through_its_datasource_variable() -> None:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert doc["uid"] == "otel-loopguard" and doc["schemaVersion"] >= 36
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    with_targets = [p for p in doc["panels"] if p.get("targets")]
    assert len(with_targets) >= 12
    for panel in with_targets:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"] and target["expr"].strip(), panel["title"]
            if target["expr"].startswith(("count(ALERTS", "up{")):
                continue
            assert 'job=~"$job",instance=~"$instance"' in target["expr"], (panel["title"], target["expr"])


@pytest.mark.real
def test_promtool_check_rules_passes() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout, result.stdout


@pytest.mark.real
def test_promtool_unit_tests_of_each_alert_pass() -> None:
    result = promtool("test", "rules", str(UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


@pytest.mark.real
def test_promtool_unit_tests_fail_when_the_loop_rule_is_broken(tmp_path: Path) -> None:
    """Negative control: the same unit tests against a loop rule that only looks at `cycle`."""
    (tmp_path / "alerts").mkdir()
    (tmp_path / "tests" / "alerts").mkdir(parents=True)
    text = RULES.read_text(encoding="utf-8")
    broken = text.replace('kind=~"repeat|cycle|error_streak|no_progress"', 'kind=~"cycle"')
    assert broken != text
    (tmp_path / "alerts" / RULES.name).write_text(broken, encoding="utf-8")
    shutil.copy(UNIT_TESTS, tmp_path / "tests" / "alerts" / UNIT_TESTS.name)
    result = promtool("test", "rules", str(tmp_path / "tests" / "alerts" / UNIT_TESTS.name))
    assert result.returncode != 0, result.stdout
    assert "LoopguardToolLoop" in result.stdout + result.stderr
