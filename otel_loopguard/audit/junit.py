"""Render run reports as JUnit XML, the test report format CI systems display.

One `<testsuite>` per input file, in the order given; one `<testcase>` per run, in the suite
of the first file that holds records of it (a run spread over several files names the others).
A run that breaks the release rule is a `<failure>` whose message names the broken rules and
the findings; a run that could not be scored is `<skipped>` with the reason (an incomplete
trace is not a pass, and not a loop either); a file without tool calls is one skipped case.
The document follows the JUnit XML schema of the Jenkins xUnit plugin (junit-10.xsd), which
GitLab, GitHub test-report actions and pytest's own `--junitxml` follow too;
tests/audit/junit.xsd is the schema the tests validate it against.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..findings import Finding
from ..score.readout import readout, shown_text, waste_text
from ..score import RunReport

SUITES_NAME = "otel-loopguard audit"
NO_TOOL_CALLS = "(no tool calls)"
# Characters XML 1.0 cannot carry even escaped (control characters, lone surrogates): a tool
# name or run id from a trace may hold them, and one would make the whole report unreadable.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def to_junit(reports: Sequence[RunReport], files: Sequence[Path], empty: Iterable[Path],
             sources: Mapping[str, Sequence[Path]]) -> str:
    """The JUnit XML document: `files` as given on the command line, `empty` the ones without a
    tool call, `sources` each run's files in the order read."""
    by_file: dict[str, list[RunReport]] = {str(f): [] for f in files}
    for report in reports:
        where = [str(f) for f in sources.get(report.run_id, ())] or ["(unknown file)"]
        by_file.setdefault(where[0], []).append(report)
    empty_names = {str(f) for f in empty}
    root = ET.Element("testsuites", name=SUITES_NAME)
    for name, runs in by_file.items():
        root.append(_suite(name, runs, name in empty_names, sources))
    _count(root, root.findall("testsuite"), skipped=False)  # the schema has no skipped count up here
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(name: str, runs: list[RunReport], empty: bool, sources: Mapping[str, Sequence[Path]]) -> ET.Element:
    suite = ET.Element("testsuite", name=_xml(name), file=_xml(name))
    for report in runs:
        suite.append(_case(name, report, [str(f) for f in sources.get(report.run_id, ())][1:]))
    if empty and not runs:
        case = ET.SubElement(suite, "testcase", name=NO_TOOL_CALLS, classname=_xml(name))
        ET.SubElement(case, "skipped", message="the file holds no tool calls: nothing in it to judge")
    _count(suite, suite.findall("testcase"))
    return suite


def _count(element: ET.Element, children: list[ET.Element], skipped: bool = True) -> None:
    """The counts CI systems read first, in the attribute order pytest writes them."""
    cases = [c for child in children for c in ([child] if child.tag == "testcase" else child.iter("testcase"))]
    counts = {
        "tests": len(cases),
        "failures": sum(c.find("failure") is not None for c in cases),
        "errors": 0,  # an audit that cannot read its input exits 2 and writes no report
    }
    if skipped:
        counts["skipped"] = sum(c.find("skipped") is not None for c in cases)
    for key, value in counts.items():
        element.set(key, str(value))


def _case(file: str, report: RunReport, also_in: list[str]) -> ET.Element:
    case = ET.Element("testcase", name=_xml(report.run_id), classname=_xml(file))
    if report.passed is False:
        failure = ET.SubElement(case, "failure", type="release_rule", message=_xml(_failure_message(report)))
        failure.text = _xml("\n".join(["release rule broken:", *(f"  {v}" for v in readout(report).broken),
                                       *_finding_lines(report)]))
    elif report.passed is None:
        ET.SubElement(case, "skipped", message=_xml(_skip_message(report)))
    out = _details(report, also_in)
    if out:
        ET.SubElement(case, "system-out").text = _xml(out)
    return case


def _failure_message(report: RunReport) -> str:
    rules = [v.split(":", 1)[0] for v in report.score["release"]["violations"]]
    return f"release rule broken: {', '.join(rules)}; findings: {_findings_short(report.findings)}"


def _skip_message(report: RunReport) -> str:
    reasons = "; ".join(f.reason for f in report.findings) or "no reason recorded"
    return f"unscorable ({report.outcome}): {reasons}"


def _findings_short(findings: list[Finding]) -> str:
    if not findings:
        return "none"
    return ", ".join(f"{f.kind}/{f.severity} x{f.count} {f.tool or '-'} {_where(f)}" for f in findings)


def _finding_lines(report: RunReport) -> list[str]:
    """One line a loop (score/readout.py), its cost under it, then the run's."""
    shown = readout(report)
    lines = ["findings:" if shown.shown else "findings: none"]
    for s in shown.shown:
        f = s.finding
        lines.append(f"  {f.severity} {f.kind} {_where(f)} x{f.count} {f.tool or '-'}: {f.reason}{shown_text(s)}")
        if s.waste is not None:
            lines.append(f"    cost: {waste_text(s.waste)}")
    if shown.waste.calls:
        lines.append(f"loops cost: {waste_text(shown.waste)}")
    return lines


def _where(f: Finding) -> str:
    return f"seq {f.first_seq}" if f.first_seq == f.last_seq else f"seq {f.first_seq}-{f.last_seq}"


def _details(report: RunReport, also_in: list[str]) -> str:
    """What a person opening the case reads: the outcome, the score fields, the findings."""
    lines = [f"outcome: {report.outcome}"]
    if also_in:
        lines.append("records also in: " + ", ".join(also_in))
    score = report.score
    if score.get("scorable"):
        fields = {k: v for k, v in score.items() if k not in ("release", "findings_by_kind", "scorable")}
        lines.append("score: " + ", ".join(f"{k}={_show(v)}" for k, v in fields.items()))
    if report.passed is not False:  # a failure's text lists them already
        lines += _finding_lines(report)
    return "\n".join(lines)


def _show(v: Any) -> str:
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", str(text))
