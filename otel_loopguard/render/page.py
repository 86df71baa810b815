"""The page every HTML report shares: inline CSS, an inline script, nothing fetched.

The script's errors (and any the report's own script raises) are written into the page
(`#script-errors`), and `data-ready` is set on <body> once the script ran: a headless browser
test reads both from the DOM (tests/calibrate/test_html_browser.py).
"""

from __future__ import annotations

import html
import json
from typing import Any

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
h3{font-size:1em;margin:1em 0 .3em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}
td:first-child,th:first-child,td.ids{text-align:left}tr.current td{font-weight:600}tr.recorded td{font-style:italic}
.pass{color:#17702a}.fail{color:#b00020}.unscorable{color:#8a6d00}
.run{margin:1em 0 1.5em}.run.flipped{outline:2px solid #b00020;outline-offset:4px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #eee;padding:4px}
.legend span{margin-right:1em}.muted{color:#666}svg text{font:11px system-ui,sans-serif}
#script-errors:empty{display:none}#script-errors{color:#b00020;border:1px solid #b00020;padding:.5em}
"""

# Before anything else: errors of later scripts land in the page, where a test can read them.
_CATCH = """
window.addEventListener('error', function (e) {
  var box = document.getElementById('script-errors');
  var li = document.createElement('li'); li.textContent = String(e.message || e); box.appendChild(li);
});
"""


def page(title: str, body: str, script: str = "", data: Any = None) -> str:
    blob = ""
    if data is not None:  # inert JSON for the script; </ cannot end the element early
        text = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
        blob = f'<script type="application/json" id="report-data">{text}</script>\n'
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>\n"
        # No network at all: a report opened from a mail or a CI artifact fetches nothing.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
        f"<style>{CSS}</style>\n<script>{_CATCH}</script></head>\n<body>\n"
        f"<ul id=\"script-errors\"></ul>\n{body}\n{blob}"
        f"<script>\n{script}\ndocument.body.setAttribute('data-ready', '1');\n</script>\n</body></html>\n"
    )


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)
