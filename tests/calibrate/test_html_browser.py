"""The HTML reports render in a real browser: headless Chromium (Debian's `chromium`) opens
them from disk, runs their script, and the DOM it dumps must show every run's timeline and
every chart drawn with a size, the page's script finished (`data-ready`), and no script error
caught (`#script-errors` empty). No pixel comparison. A page with a broken script is the
negative control: the same check must see its error."""

from __future__ import annotations

import re
from pathlib import Path

from otel_loopguard.audit import audit
from otel_loopguard.audit.html import to_html as audit_html
from otel_loopguard.calibrate.command import render, run_calibration

from calibrate_helpers import EXAMPLES, OBSERVED, RUN_ATTR, dump_dom

ERRORS = re.compile(r'<ul id="script-errors">(.*?)</ul>', re.S)


def _body(dom: str) -> str:
    match = re.search(r"<body([^>]*)>", dom)
    assert match, dom[:500]
    return match.group(1)


def _rendered(page: Path) -> tuple[str, str]:
    dom = dump_dom(page)
    errors = ERRORS.search(dom)
    assert errors is not None, "the error box is gone"
    return _body(dom), errors.group(1).strip()


def _offline(html: str) -> None:
    """Self-contained: nothing to fetch (the SVG namespace is a name, not a request)."""
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html)) - {"http://www.w3.org/2000/svg"}
    assert not urls and not re.search(r"<(?:link|img|iframe)\b|\bsrc=", html), urls


def test_the_calibrate_report_renders_its_runs_and_charts(tmp_path: Path, captures: list[Path]) -> None:
    files = [*sorted(EXAMPLES.glob("*.ndjson")), OBSERVED, *captures[:6]]
    cal = run_calibration(files, ["repeat.stop_at=3..7", "tools.search_cases.max_calls=5,10"],
                          run_id_attribute=RUN_ATTR)
    html = render(cal, "html")
    _offline(html)
    page = tmp_path / "calibrate.html"
    page.write_text(html, encoding="utf-8")
    body, errors = _rendered(page)
    assert errors == ""
    assert 'data-ready="1"' in body
    timelines, charts = html.count('<svg class="timeline"'), html.count('<svg class="chart"')
    assert timelines == len(cal.prepared) == 3 + 4 + 6
    assert charts >= 2 * 3  # two swept keys, at least three tools that warn or stop
    assert f'data-drawn="{timelines + charts}"' in body  # every picture has a size on the page


def test_the_audit_report_renders_every_run(tmp_path: Path) -> None:
    reports = audit([*sorted(EXAMPLES.glob("*.ndjson"))])
    html = audit_html(reports, 1)
    _offline(html)
    page = tmp_path / "audit.html"
    page.write_text(html, encoding="utf-8")
    body, errors = _rendered(page)
    assert errors == "" and 'data-ready="1"' in body
    assert f'data-drawn="{len(reports)}"' in body
    assert "uncontained_loop" in html  # the failed release rule is shown, not left to the JSON


def test_a_script_error_is_seen_negative_control(tmp_path: Path) -> None:
    cal = run_calibration(sorted(EXAMPLES.glob("*.ndjson")), ["repeat.stop_at=4,6"])
    broken = render(cal, "html").replace('<select id="candidate">', '<select id="renamed">')
    page = tmp_path / "broken.html"
    page.write_text(broken, encoding="utf-8")
    body, errors = _rendered(page)
    assert "addEventListener" in errors or "null" in errors  # the picker's script found no picker
    assert 'data-ready="1"' not in body
