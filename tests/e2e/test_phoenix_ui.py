"""Phoenix's own UI, as an on-call engineer sees it: headless Chromium at 1400x900.

The README's setup (the receiver with `--annotate-phoenix-url` in front of a real Phoenix) gets
a looping agent and a healthy one. Chromium (tests/e2e/browser.py) opens Phoenix's traces list
and the looping trace, saves a screenshot of each (test artifacts, not committed:
`test-artifacts/phoenix/`, or the folder named by LOOPGUARD_ARTIFACTS) and asserts from the page:

- in the traces list, without opening anything, the looping trace's row shows a red ERROR status
  and, in the "error" column, the tool and the count (`lookup_order x5 …`), both inside the
  window: the processor (`install()`) marks a stopped run's root span, which is the row. The
  healthy trace's row shows neither. The verdict also sits in the "span annotations" and "trace
  annotations" columns (the receiver's `--annotate-phoenix-url`), past the window's right edge;
- in the open trace, the loop reads as one finding: one `loopguard` verdict for the trace, and
  the call enforce mode would have denied is marked as such in the tree
  (`FINDINGS_PER_LOOP` is what the page shows today, to tighten when findings are folded).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from .browser import Page, browser, chromium, websockets_installed
from .phoenix_server import Phoenix, phoenix_installed, running_phoenix
from .test_phoenix import CALLS, PROJECT, TOOL, Receiver, _run_agents, _serving

pytestmark = [
    pytest.mark.skipif(not phoenix_installed(), reason="arize-phoenix is not installed (the `phoenix` extra)"),
    pytest.mark.skipif(chromium() is None and not os.environ.get("CI"), reason="chromium not found (scripts/test.sh installs it)"),
    pytest.mark.skipif(not websockets_installed(), reason="websockets is not installed (the `frameworks` extra)"),
]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("LOOPGUARD_ARTIFACTS") or ROOT / "test-artifacts") / "phoenix"
WIDTH, HEIGHT = 1400, 900
LABEL = "stop: repeat lookup_order x5"
# Finding spans the open trace shows for one loop: the repeat's warn is folded into its stop and
# the no_progress over the same calls is one of its events (issue 29, item 2).
FINDINGS_PER_LOOP = 1
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# The traces list as laid out: each header's text, and each row's cells with their text (as
# shown, and all of it: Phoenix folds a chip that does not fit into a "+1" badge), whether the
# cell lies inside the window, the text a person sees in it (the characters not hidden by a
# clipping box, less an ellipsis' width where the text overflows), and the first mark's label and
# colour (the status icon says ERROR or UNSET in its aria-label).
TABLE_JS = """
(() => {
  const inside = el => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth + 1 && r.top >= 0 && r.bottom <= window.innerHeight; };
  // The right edge of the content boxes around a text (its own to the cell's), less an ellipsis'
  // width when the text runs past it, by any fraction of a pixel: the characters left of it are on screen.
  const edge = (node, td) => { let right = window.innerWidth;
    for (let el = node.parentElement; el; el = el.parentElement) { const st = getComputedStyle(el);
      right = Math.min(right, el.getBoundingClientRect().right - parseFloat(st.paddingRight) - parseFloat(st.borderRightWidth));
      if (el === td) break; }
    const all = document.createRange(); all.selectNodeContents(node);
    return all.getBoundingClientRect().right > right + 0.01 ? right - parseFloat(getComputedStyle(node.parentElement).fontSize) : right; };
  const seen = td => { let out = ''; const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) { const right = edge(n, td);
      for (let i = 0; i < n.length; i++) { const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
        if (r.getBoundingClientRect().right > right + 0.5) return out; out += n.data[i]; } }
    return out; };
  const mark = td => { const el = td.querySelector('[aria-label]');
    return el ? {label: el.getAttribute('aria-label'), color: getComputedStyle(el).color} : null; };
  return {
    headers: [...document.querySelectorAll('thead th')].map(th => th.innerText.trim()),
    rows: [...document.querySelectorAll('tbody tr')].map(tr => [...tr.children].map(td => ({
      shown: td.innerText.trim(), all: td.textContent.trim(), visible: inside(td), seen: seen(td).trim(),
      mark: mark(td)}))),
  };
})()
"""
# The open trace's tree scrolled to the call enforce mode would have denied.
SCROLL_TO_DENIED_JS = """
(() => { const all = [...document.querySelectorAll('span, div')].filter(e => e.children.length === 0
    && e.textContent.includes('would deny'));
  if (all.length) all[0].scrollIntoView({block: 'center'}); return all.length; })()
"""


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[Phoenix]:
    with running_phoenix(tmp_path) as server:
        yield server


@pytest.fixture
def annotating_receiver(phoenix: Phoenix, tmp_path: Path) -> Iterator[Receiver]:
    with _serving(phoenix, tmp_path, "--annotate-phoenix-url", phoenix.url) as running:
        yield running


def _graphql(phoenix: Phoenix, query: str) -> dict[str, Any]:
    body = json.dumps({"query": query}).encode()
    request = urllib.request.Request(f"{phoenix.url}/graphql", data=body, headers={"Content-Type": "application/json"})
    with _HTTP.open(request, timeout=10) as reply:
        answer = json.load(reply)
    assert "errors" not in answer, answer["errors"]
    return dict(answer["data"])


def _project_id(phoenix: Phoenix) -> str:
    edges = _graphql(phoenix, "{ projects { edges { node { id name } } } }")["projects"]["edges"]
    (node,) = [e["node"] for e in edges if e["node"]["name"] == PROJECT]
    return str(node["id"])


def _wait_annotated(phoenix: Phoenix, trace_ids: list[str], receiver: Receiver) -> None:
    """Until Phoenix holds the looping trace's annotation, both run summaries, and the span
    annotation of the call enforce would deny (posted apart from the trace's: the page read once
    must already show it)."""
    deadline = time.monotonic() + 45
    while True:
        notes = phoenix.trace_annotations(PROJECT, trace_ids[:1])
        spans = [phoenix.spans(PROJECT, t) for t in trace_ids]
        done = [any(s["name"].startswith("loopguard.run") for s in found) for found in spans]
        if notes and all(done) and phoenix.span_labelled(PROJECT, trace_ids[0], "would deny"):
            return
        assert time.monotonic() < deadline, f"not annotated after 45 s: {notes} {done}\n{receiver.stderr.read_text()[-3000:]}"
        time.sleep(0.5)


def _shot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return page.screenshot(ARTIFACTS / name)


def test_the_looping_trace_stands_out_in_phoenix_at_1400x900(
    phoenix: Phoenix, annotating_receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")
    phoenix.wait_healthy(120)  # a shared machine under load can take more than a minute
    looping, healthy = _run_agents(annotating_receiver.port, [{"order_id": "A12"}] * CALLS,
                                   [{"order_id": f"A{i}"} for i in range(1, CALLS + 1)])
    _wait_annotated(phoenix, [looping.trace_id, healthy.trace_id], annotating_receiver)
    project = _project_id(phoenix)

    with browser(tmp_path, WIDTH, HEIGHT) as page:
        page.goto(f"{phoenix.url}/projects/{project}/traces")
        page.wait_for("document.querySelectorAll('tbody tr').length >= 2", "the two traces' rows")
        page.wait_for("document.body.innerText.includes('loopguard')", "the loopguard annotation")
        table = page.evaluate(TABLE_JS)
        _shot(page, "traces-list.png")
        page.goto(f"{phoenix.url}/projects/{project}/traces/{looping.trace_id}")
        page.wait_for("document.body && document.body.innerText.includes('would deny')", "the denied call's mark")
        page.wait_for("document.body.innerText.includes('Annotations')", "the root span's details")
        # The open trace's panel: what follows its id (the list behind it shows no trace ids).
        trace_text = page.evaluate("document.body.innerText").split(looping.trace_id, 1)[1]
        _shot(page, "looping-trace.png")
        page.evaluate(SCROLL_TO_DENIED_JS)
        time.sleep(0.5)
        _shot(page, "looping-trace-denied-call.png")

    # The list: the looping trace's row carries the verdict with the tool and the count, in the
    # "span annotations" column (its root span's annotation) and as the charted score in
    # "trace annotations"; the healthy trace's row carries neither.
    column = {name: k for k, name in enumerate(table["headers"])}
    spans_col, trace_col = column["span annotations"], column["trace annotations"]
    looping_row, healthy_row = _row_with(table["rows"], spans_col, LABEL), _row_without(table["rows"], spans_col, "loopguard")
    assert looping_row[spans_col]["all"].count("loopguard") == 1, looping_row[spans_col]
    assert "loopguard" in looping_row[trace_col]["all"] and "5.00" in looping_row[trace_col]["all"]
    assert healthy_row[spans_col]["all"] == "--" and "loopguard" not in healthy_row[trace_col]["all"]

    # The open trace: one verdict for the trace (the header's one `loopguard` score), the root
    # span's verdict, each offending call's place in the loop, the call enforce would deny.
    assert trace_text.count("μ\xa05.00") == 1, trace_text  # the header: one loopguard score, 5 calls
    # The root span's verdict: its chip in the tree and in its details (a trace opens on its root).
    assert trace_text.count(LABEL) == 2, trace_text
    assert [f"repeat {k}/5" in trace_text for k in range(1, 5)] == [True] * 4
    assert trace_text.count("would deny: repeat 5/5") == 1 and "would warn" not in trace_text
    findings = [n for n in trace_text.splitlines() if n.startswith("loopguard.finding")]
    assert len(findings) == FINDINGS_PER_LOOP, findings

    # Visible at 1400x900 without opening anything, with the README's setup (install() in the app):
    # the processor marks the looping run's root span, which is the row. Phoenix shows the root's
    # status (red, "ERROR") and the start of its status message in the "error" column; the
    # annotation columns start past the window's right edge.
    (ARTIFACTS / "traces-list.json").write_text(json.dumps(table, indent=1))
    status_col, error_col = column["status"], column["error"]
    stop, calm = looping_row[status_col], healthy_row[status_col]
    assert stop["visible"] and stop["mark"]["label"] == "ERROR" and _red(stop["mark"]["color"]), stop
    assert calm["mark"]["label"] == "UNSET" and not _red(calm["mark"]["color"]), calm
    error, quiet = looping_row[error_col], healthy_row[error_col]
    assert error["visible"] and error["seen"].startswith(f"{TOOL} x5"), error  # tool and count, not cut
    # The measure sees the cut the screenshot shows (`lookup_order x5 re…`).
    assert len(error["seen"]) < len(error["all"]), error
    assert quiet["all"] == "--", quiet
    differ = [k for k, (a, b) in enumerate(zip(looping_row, healthy_row)) if a["visible"] and a["seen"] != b["seen"]]
    assert differ == [error_col], (differ, table["headers"])


def _red(color: str) -> bool:
    """`rgb(r, g, b)` (or rgba) that is mostly red."""
    r, g, b = (float(v) for v in color[color.index("(") + 1:color.index(")")].split(",")[:3])
    return r > 150 and r > 1.5 * g and r > 1.5 * b


def _row_with(rows: list[list[dict[str, Any]]], col: int, text: str) -> list[dict[str, Any]]:
    (row,) = [r for r in rows if len(r) > col and text in r[col]["all"]]
    return row


def _row_without(rows: list[list[dict[str, Any]]], col: int, text: str) -> list[dict[str, Any]]:
    (row,) = [r for r in rows if len(r) > col and text not in r[col]["all"]]
    return row
