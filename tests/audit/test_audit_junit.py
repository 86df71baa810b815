"""`otel-loopguard audit --format junit` and `--junit FILE`: the report CI systems display.

Every committed fixture case (tests/fixtures/expected.json) is audited once as JUnit XML. The
document is read back by a JUnit parser from PyPI (junitparser), validated against the JUnit XML
schema (tests/audit/junit.xsd, the Jenkins xUnit plugin's format, see its header) by a real XML
schema library (xmlschema), and each run's test case is checked against the verdict the manifest
lists: a failure naming every broken rule and finding kind, a skip saying why the run could not
be scored, nothing for a pass.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.findings.wording import plain_rule
import xmlschema
from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

from audit_helpers import FIXTURES, Audit, write_ndjson

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).with_name("junit.xsd")))
MANIFEST = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
CASES = {case["name"]: case for case in MANIFEST["cases"]}


def _args(case: dict[str, Any]) -> list[Any]:
    files = [FIXTURES / f for f in case["files"]]
    return files + (["--policy", FIXTURES / case["policy"]] if case["policy"] else [])


def _junit(text: str) -> JUnitXml:
    SCHEMA.validate(text)  # raises, naming the element and the rule, when the document breaks the schema
    xml = JUnitXml.fromstring(text)
    assert isinstance(xml, JUnitXml), "the root is <testsuites>"
    return xml


def _cases(xml: JUnitXml) -> dict[str, tuple[TestSuite, TestCase]]:
    return {case.name: (suite, case) for suite in xml for case in suite}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_run_of_every_fixture_is_a_test_case_with_its_verdict(name: str, audit_fast: Audit) -> None:
    case = CASES[name]
    proc = audit_fast(*_args(case), fmt="junit")
    assert proc.returncode == case["exit"], proc.stderr  # the verdict's exit status, as without JUnit
    xml = _junit(proc.stdout)
    assert [s.name for s in xml] == [str(FIXTURES / f) for f in case["files"]]  # a suite per file, in order
    report = json.loads(audit_fast(*_args(case), fmt="json").stdout)
    runs = {r["run_id"]: r for r in report["runs"]}
    cases = _cases(xml)
    assert set(cases) == set(case["runs"])  # a test case per run, no more
    for run_id, expected in case["runs"].items():
        suite, test = cases[run_id]
        assert suite.name == str(FIXTURES / case["files"][0])  # the suite of the run's first file
        _check_verdict(test, expected["passed"], runs[run_id])
    assert xml.tests == len(cases)
    assert xml.failures == sum(r["passed"] is False for r in case["runs"].values())


def _check_verdict(test: TestCase, passed: Any, run: dict[str, Any]) -> None:
    results = test.result
    if passed is True:
        assert results == [] and test.is_passed
        return
    assert len(results) == 1
    result = results[0]
    if passed is False:
        assert isinstance(result, Failure) and result.type == "release_rule"
        for violation in run["score"]["release"]["violations"]:
            rule = violation.split(":", 1)[0]
            # The text says it in plain words, the rule's name after them (issue 29).
            assert rule in result.message and plain_rule(violation) in result.text and f"[{rule}]" in result.text
        for finding in run["findings"]:
            assert f"{finding['kind']}/{finding['severity']}" in result.message
            # One line a loop: a finding folded into another is named on its line, not repeated.
            folded = (f"{finding['kind']} ({finding['severity']})" in result.text
                      or finding["severity"] == "warn" and "[warned at call" in result.text)
            assert finding["reason"] in result.text or folded, (finding, result.text)
    else:
        assert isinstance(result, Skipped)
        assert f"unscorable ({run['outcome']})" in result.message
        assert run["findings"], "an unscorable run says why: its integrity findings"
        for finding in run["findings"]:
            assert finding["reason"] in result.message


def test_a_run_split_over_two_files_is_one_case_in_the_first_files_suite(audit_fast: Audit) -> None:
    xml = _junit(audit_fast(*_args(CASES["split_run"]), fmt="junit").stdout)
    first, second = list(xml)
    assert [c.name for c in first] == ["split-run"] and len(second) == 0
    assert (first.tests, second.tests) == (1, 0)
    out = next(iter(first)).system_out
    assert "records also in: " + str(FIXTURES / "ndjson/split_run_part2.ndjson") in out


def test_a_file_without_tool_calls_is_a_skipped_case(tmp_path: Path, audit_fast: Audit) -> None:
    (tmp_path / "empty.ndjson").write_text("\n", encoding="utf-8")
    proc = audit_fast(FIXTURES / "ndjson/seed_pagination.ndjson", tmp_path / "empty.ndjson", fmt="junit")
    assert proc.returncode == 0  # as the text and JSON audits say: the one run passes
    xml = _junit(proc.stdout)
    suites = {s.name: s for s in xml}
    empty = suites[str(tmp_path / "empty.ndjson")]
    (case,) = list(empty)
    assert case.name == "(no tool calls)" and isinstance(case.result[0], Skipped)
    assert (xml.tests, xml.failures, empty.skipped) == (2, 0, 1)


@pytest.mark.real  # starts a process
def test_junit_file_beside_the_text_report(tmp_path: Path, audit: Audit) -> None:
    """CI keeps its readable log and gets the report: --junit FILE changes nothing on stdout."""
    case = CASES["seed_stalled_lookup"]
    plain = audit(*_args(case))
    both = audit(*_args(case), "--junit", tmp_path / "report.xml")
    assert both.returncode == plain.returncode == 1
    assert both.stdout == plain.stdout and "SUMMARY" in both.stdout
    written = (tmp_path / "report.xml").read_text(encoding="utf-8")
    assert written == audit(*_args(case), fmt="junit").stdout
    assert _junit(written).failures == 1


def test_an_unwritable_junit_path_is_bad_usage_not_a_verdict(tmp_path: Path, audit_fast: Audit) -> None:
    proc = audit_fast(*_args(CASES["seed_pagination"]), "--junit", tmp_path / "no-such-dir" / "report.xml")
    assert proc.returncode == 2
    assert "cannot write the JUnit report" in proc.stderr


def test_control_characters_in_run_ids_and_tools_leave_the_report_readable(tmp_path: Path, audit_fast: Audit) -> None:
    """XML 1.0 cannot carry them even escaped: without the replacement the whole report is lost."""
    run = "run\x01\x1b[31m"
    calls = [{"run_id": run, "sequence": i, "call_id": f"c{i}", "turn": i, "tool": "look\x00up",
              "arguments": {"q": 1}, "observation": {"same": True}} for i in range(1, 7)]
    proc = audit_fast(write_ndjson(tmp_path / "ctl.ndjson", calls), fmt="junit")
    assert proc.returncode == 1
    ((name, (_, case)),) = _cases(_junit(proc.stdout)).items()
    assert name == "run\ufffd\ufffd[31m"
    assert "look\ufffdup" in case.result[0].message


def test_the_schema_rejects_what_ci_systems_would_not_read(audit_fast: Audit) -> None:
    """The validation can fail: the same report without a suite's required count, or with two
    outcomes in one case, is refused."""
    text = audit_fast(*_args(CASES["split_run"]), fmt="junit").stdout
    assert SCHEMA.is_valid(text)
    root = ET.fromstring(text)
    del root.find("testsuite").attrib["failures"]
    assert not SCHEMA.is_valid(ET.tostring(root, encoding="unicode"))
    root = ET.fromstring(text)
    case = root.find("testsuite/testcase")
    case.insert(0, ET.Element("skipped"))
    assert not SCHEMA.is_valid(ET.tostring(root, encoding="unicode"))


def test_counts_add_up_over_every_fixture_at_once(audit_fast: Audit) -> None:
    """One audit of all fixture files with the seed policy: the root's counts are the cases'."""
    files = sorted({f for c in MANIFEST["cases"] if c["policy"] == "policies/seed-v1.yaml" for f in c["files"]})
    proc = audit_fast(*[FIXTURES / f for f in files], "--policy", FIXTURES / "policies/seed-v1.yaml", fmt="junit")
    xml = _junit(proc.stdout)
    cases = [c for s in xml for c in s]
    assert xml.tests == len(cases) == sum(s.tests for s in xml)
    assert xml.failures == sum(isinstance(r, Failure) for c in cases for r in c.result) == sum(s.failures for s in xml)
    assert sum(s.skipped for s in xml) == sum(isinstance(r, Skipped) for c in cases for r in c.result) > 0
    assert re.search(r'<testsuites name="otel-loopguard audit" tests="\d+" failures="\d+" errors="0"', proc.stdout)
    assert proc.returncode == 1
