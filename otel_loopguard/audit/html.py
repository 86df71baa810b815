"""The audit as one self-contained HTML page: per run its verdict, the release rules it
breaks, its findings and its timeline (the same picture calibrate draws: render/timeline.py)."""

from __future__ import annotations

from collections import Counter
from typing import Optional

from ..render.page import esc, page
from ..render.timeline import Band, Flag, Mark, Timeline, legend, svg
from ..score import RunReport
from ..score.readout import readout, shown_text, waste_text

_VERDICT = {True: "pass", False: "fail", None: "unscorable"}
MAX_RUNS_DRAWN = 300  # a page that opens: failing runs first, then unscorable, then passing

# Failing runs first: the reader came for them. The drawn count lets a browser test check
# that every timeline rendered.
_SCRIPT = r"""
(function () {
  var drawn = 0;
  document.querySelectorAll('svg.timeline').forEach(function (s) { if (s.getBBox().width > 0) { drawn += 1; } });
  document.body.setAttribute('data-drawn', String(drawn));
})();
"""


def to_html(reports: list[RunReport], status: Optional[int] = None) -> str:
    verdicts = Counter(r.passed for r in reports)
    head = (f"<h1>otel-loopguard audit</h1><p>{len(reports)} runs: <span class='pass'>{verdicts[True]} pass</span>, "
            f"<span class='fail'>{verdicts[False]} fail</span>, <span class='unscorable'>{verdicts[None]} "
            "unscorable</span>" + (f"; exit status {status}" if status is not None else "") + f".</p>{legend()}")
    ordered = sorted(range(len(reports)), key=lambda i: {False: 0, None: 1, True: 2}[reports[i].passed])
    body = head + "\n".join(_run(i, reports[i]) for i in ordered[:MAX_RUNS_DRAWN])
    if len(ordered) > MAX_RUNS_DRAWN:
        body += (f"<p class='muted'>{len(ordered) - MAX_RUNS_DRAWN} more runs not drawn (at most {MAX_RUNS_DRAWN}, "
                 "failing ones first): `--format json` lists every run.</p>")
    return page("otel-loopguard audit", body, _SCRIPT)


def _run(i: int, r: RunReport) -> str:
    verdict = _VERDICT[r.passed]
    shown = readout(r)
    broken = "".join(f"<li>{esc(v)}</li>" for v in shown.broken)
    findings = "".join(f"<li>{esc(s.finding.severity)} <b>{esc(s.finding.kind)}</b> calls {s.finding.first_seq}-"
                       f"{s.finding.last_seq}: {esc(s.finding.reason)}{esc(shown_text(s))}"
                       + (f"<br><span class='muted'>cost: {esc(waste_text(s.waste))}</span>" if s.waste else "")
                       + "</li>" for s in shown.shown)
    if shown.waste.calls:
        findings += f"<li class='muted'>loops cost: {esc(waste_text(shown.waste))}</li>"
    return (f'<div class="run" id="run-{i}"><h3>{esc(r.run_id)} <span class="{verdict}">{verdict}</span> '
            f'<span class="muted">{esc(r.outcome)}, {len(r.records) or len(r.calls)} calls</span></h3>'
            + (f"<p>Release rule broken:</p><ul class='fail'>{broken}</ul>" if broken else "")
            + svg(timeline(r), f"timeline-{i}")
            + (f"<ul class='findings'>{findings}</ul>" if findings else "<p class='muted'>no findings</p>")
            + "</div>")


def timeline(r: RunReport) -> Timeline:
    digests = {c.seq: c.action for c in r.calls}
    if r.records:
        marks = [Mark(seq=c.seq, tool=c.tool, action=digests.get(c.seq), ok=c.ok, dispatched=c.dispatched)
                 for c in r.records]
    else:
        marks = [Mark(seq=c.seq, tool=c.tool, action=c.action, ok=c.ok) for c in r.calls]
    bands = [Band(kind=f.kind, severity=f.severity, first_seq=f.first_seq, last_seq=f.last_seq, tool=f.tool,
                  reason=f.reason) for f in r.findings if f.first_seq]
    flags = [Flag(seq=c.seq, verb="deny" if not c.dispatched else "would_block", label=c.guard or "")
             for c in r.records if c.guard]
    guard_seq = r.score.get("guard_seq")
    if guard_seq is not None and not flags:
        flags.append(Flag(seq=guard_seq, verb="deny", label=f"guard decision ({r.score.get('guard_before_dispatch')})"))
    return Timeline(run_id=r.run_id, calls=marks, bands=bands, flags=flags)
