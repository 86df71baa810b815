"""The calibration as one self-contained HTML page.

Per tool: the table the text report prints, and per swept key a small chart of the runs
that would stop (red) and warn (amber) against each candidate value, the current policy's
stops as a dashed line. Per run: its timeline (render/timeline.py) with the current policy's
findings and the recorded guard decisions. A candidate picked in the page moves each run's
"blocking stops here" line and outlines the runs whose stop or verdict differs from current.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

from ..render.page import esc, page
from ..render.timeline import Band, Flag, Mark, Timeline, legend, svg
from ..score.readout import waste_text
from .calibration import Calibration, Result
from .replay import RUN_LEVEL, Replayed
from .report import is_loud

CHART_W, CHART_H, PAD = 300, 150, 30
MAX_RUNS_DRAWN = 300  # a week of runs is thousands: the page draws the ones a reader needs

_SCRIPT = r"""
(function () {
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var pick = document.getElementById('candidate');
  function place(line, svg, seq) {
    var seqs = svg.getAttribute('data-seqs').split(',').map(Number);
    var i = seq === null ? -1 : seqs.indexOf(seq);
    if (i < 0) { line.setAttribute('visibility', 'hidden'); return; }
    var x = Number(svg.getAttribute('data-x0')) + i * Number(svg.getAttribute('data-cell')) - 2;
    line.setAttribute('x1', x); line.setAttribute('x2', x); line.setAttribute('visibility', 'visible');
  }
  function show(name) {
    var cand = data.candidates.filter(function (c) { return c.name === name; })[0];
    var now = data.candidates[0];
    var flipped = 0;
    document.querySelectorAll('svg.timeline').forEach(function (svg) {
      var run = svg.getAttribute('data-run');
      var seq = run in cand.stops ? cand.stops[run] : null;
      place(svg.querySelector('.stop-mark'), svg, seq);
      var before = run in now.stops ? now.stops[run] : null;
      var differs = seq !== before || cand.verdicts[run] !== now.verdicts[run];
      svg.closest('.run').classList.toggle('flipped', differs);
      if (differs) { flipped += 1; }
    });
    document.getElementById('picked').textContent = name + ': ' + flipped +
      ' run(s) stop elsewhere or change verdict against current';
  }
  pick.addEventListener('change', function () { show(pick.value); });
  show(pick.value);
  var drawn = 0;
  document.querySelectorAll('svg.timeline, svg.chart').forEach(function (s) {
    if (s.getBBox().width > 0) { drawn += 1; }
  });
  document.body.setAttribute('data-drawn', String(drawn));
})();
"""


def to_html(cal: Calibration) -> str:
    current = cal.results[0]
    body = [f"<h1>otel-loopguard calibrate</h1><p>{len(cal.prepared)} runs, {len(cal.results) - 1} candidates"
            f" against the current policy <code>{esc(current.policy_version)}</code>"
            + ("; recorded guard decisions read from the traces" if cal.recorded else "") + ".</p>",
            _picker(cal), "<h2>Per tool</h2>"]
    quiet = [t for t in cal.tools if not is_loud(cal, t)]
    for tool in cal.tools:
        if tool not in quiet:
            body.append(_tool_section(cal, tool))
    if quiet:
        body.append(f"<p class='quiet'>No warn or stop under any candidate: {esc(', '.join(quiet))}</p>")
    body.append(_verdicts(cal))
    body.append(f"<h2>Runs</h2>{legend()}<p class='muted'>Bands and triangles: findings under the current "
                "policy and the decisions recorded in the traces.</p>")
    shown = _runs_to_draw(cal)
    for i in shown:
        body.append(_run_section(i, cal.prepared[i], current.runs[i], cal.recorded.runs[i] if cal.recorded else None))
    if len(shown) < len(cal.prepared):
        body.append(f"<p class='muted'>{len(cal.prepared) - len(shown)} more runs not drawn (at most "
                    f"{MAX_RUNS_DRAWN}): none of them stops or fails under any candidate, or the page would grow "
                    "too large to open; the JSON report lists every run.</p>")
    return page("otel-loopguard calibrate", "\n".join(body), _SCRIPT, _script_data(cal))


def _runs_to_draw(cal: Calibration) -> list[int]:
    """Runs in their order, those that some candidate (or the recording) stops or fails
    first, then the rest, up to MAX_RUNS_DRAWN."""
    def matters(i: int) -> bool:
        return any(r.runs[i].stop is not None or r.runs[i].caps or r.runs[i].passed is False
                   for r in cal.all_results())

    order = sorted(range(len(cal.prepared)), key=lambda i: not matters(i))
    return sorted(order[:MAX_RUNS_DRAWN])


def _script_data(cal: Calibration) -> dict[str, Any]:
    return {"candidates": [{
        "name": r.name,
        "stops": {run.run_id: run.stop.seq for run in r.runs if run.stop is not None},
        "verdicts": {run.run_id: run.passed for run in r.runs},
    } for r in cal.results]}


def _picker(cal: Calibration) -> str:
    options = "".join(f'<option value="{esc(r.name)}">{esc(r.name)}</option>' for r in cal.results)
    return (f'<p><label>Show blocking under <select id="candidate">{options}</select></label> '
            '<span id="picked" class="muted"></span></p>')


def _tool_section(cal: Calibration, tool: str) -> str:
    label = "run-level (no single tool)" if tool == RUN_LEVEL else tool
    rows = []
    for r in cal.all_results():
        row = r.tools.get(tool)
        stops = row.stops if row else []
        stop_runs = len({rid for rid, _ in stops})
        where = ", ".join(f"{rid}:{s.seq}" for rid, s in stops[:6]) + (" ..." if len(stops) > 6 else "")
        flips = ""
        if row and r.name != "current":
            flips = " ".join([f"+{len(row.newly_stopped)}"] * bool(row.newly_stopped)
                             + [f"-{len(row.no_longer_stopped)}"] * bool(row.no_longer_stopped))
        rows.append(f'<tr class="{esc(r.name)}"><td>{esc(r.name)}</td><td>{len(row.warn_runs) if row else 0}</td>'
                    f"<td>{stop_runs}</td><td class='ids'>{esc(where)}</td><td>{int(row.saved('calls_saved')) if row else 0}</td>"
                    f"<td>{int(row.saved('tokens_saved')) if row else 0}</td><td>{esc(flips)}</td></tr>")
    table = ("<table><tr><th>candidate</th><th>warn runs</th><th>stop runs</th><th>stops at (run:call)</th>"
             "<th>calls saved</th><th>tokens saved</th><th>vs current</th></tr>" + "".join(rows) + "</table>")
    return (f"<h3>{esc(label)}</h3>{table}<p class='muted'>Runs stopped (red) and warned (amber) against each "
            f"candidate value; dashed: stopped under current.</p><div class='charts'>{_charts(cal, tool)}</div>")


def _charts(cal: Calibration, tool: str) -> str:
    groups: dict[str, list[Result]] = {}
    for r in cal.results[1:]:
        groups.setdefault(r.key or "", []).append(r)
    if not groups:
        groups = {"current": cal.results[:1]}
    return "".join(_chart(tool, key, results, cal.results[0]) for key, results in groups.items())


def _counts(r: Result, tool: str) -> tuple[int, int]:
    row = r.tools.get(tool)
    return (len({rid for rid, _ in row.stops}), len(row.warn_runs)) if row else (0, 0)


def _chart(tool: str, key: str, results: list[Result], current: Result) -> str:
    points = [(str(r.value if r.key else r.name), *_counts(r, tool)) for r in results]
    now_stops = _counts(current, tool)[0]
    top = max([now_stops, 1] + [max(s, w) for _, s, w in points])
    step = (CHART_W - 2 * PAD) / max(len(points) - 1, 1)

    def xy(i: int, v: int) -> tuple[float, float]:
        return PAD + i * step, CHART_H - PAD - v * (CHART_H - 2 * PAD) / top

    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{CHART_W}" height="{CHART_H}" '
             f'data-tool="{esc(tool)}" data-key="{esc(key)}" role="img" aria-label="stops and warns of {esc(tool)} '
             f'against {esc(key)}"><text x="4" y="12">{esc(_cut(key, 48))}</text>',
             f'<line x1="{PAD}" x2="{CHART_W - 8}" y1="{CHART_H - PAD}" y2="{CHART_H - PAD}" stroke="#999"/>',
             f'<text x="4" y="{xy(0, top)[1] + 4:.0f}">{top}</text><text x="14" y="{CHART_H - PAD + 4}">0</text>']
    y_now = xy(0, now_stops)[1]
    parts.append(f'<line x1="{PAD}" x2="{CHART_W - 8}" y1="{y_now:.1f}" y2="{y_now:.1f}" stroke="#d93025" '
                 'stroke-dasharray="3 3" stroke-opacity="0.6"><title>current policy: runs stopped</title></line>')
    for index, colour in ((1, "#d93025"), (2, "#f4b400")):
        coords = [xy(i, int(p[index])) for i, p in enumerate(points)]
        parts.append('<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>'.format(
            colour, " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)))
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"><title>{esc(p[0])}: '
                  f'{p[index]} runs</title></circle>' for (x, y), p in zip(coords, points)]
    parts += [f'<text x="{xy(i, 0)[0] - 4:.1f}" y="{CHART_H - PAD + 16}">{esc(_short(p[0]))}</text>'
              for i, p in enumerate(points)]
    parts.append("</svg>")
    return "".join(parts)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else "~" + text[-(width - 1):]


def _short(text: str) -> str:
    return text if len(text) <= 6 else text[:5] + "~"


def _verdicts(cal: Calibration) -> str:
    rows = []
    for r in cal.results:
        v = Counter(run.passed for run in r.runs)
        rows.append(f"<tr><td>{esc(r.name)}</td><td class='pass'>{v[True]}</td><td class='fail'>{v[False]}</td>"
                    f"<td class='unscorable'>{v[None]}</td><td>{esc(', '.join(r.to_fail))}</td>"
                    f"<td>{esc(', '.join(r.to_pass))}</td><td>{esc(r.note)}</td></tr>")
    return ("<h2>Release verdicts</h2><table><tr><th>candidate</th><th>pass</th><th>fail</th><th>unscorable</th>"
            "<th>to fail</th><th>to pass</th><th>note</th></tr>" + "".join(rows) + "</table>")


def _run_section(i: int, prepared: Any, now: Replayed, rec: Optional[Replayed]) -> str:
    digests = {c.seq: c.action for c in prepared.calls}
    marks = [Mark(seq=r.seq, tool=r.tool, action=digests.get(r.seq), ok=r.ok, dispatched=r.dispatched)
             for r in prepared.records]
    bands = [Band(kind=f.kind, severity=f.severity, first_seq=f.first_seq, last_seq=f.last_seq, tool=f.tool,
                  reason=f.reason) for f in now.findings if f.first_seq]
    flags = [Flag(seq=d.seq, verb=d.verb, label=f"{d.kind or ''} {d.reason or ''}".strip())
             for d in prepared.run.decisions if d.seq is not None]
    flags += [Flag(seq=r.seq, verb="deny" if not r.dispatched else "would_block", label=r.guard or "")
              for r in prepared.records if r.guard and not prepared.run.decisions]
    t = Timeline(run_id=now.run_id, calls=marks, bands=bands, flags=flags,
                 stop_seq=now.stop.seq if now.stop else None)
    verdict = {True: "pass", False: "fail", None: "unscorable"}[now.passed]
    recorded = ""
    if rec is not None and rec.stop is not None:
        recorded = f"; recorded decisions stop it at call {rec.stop.seq}"
    cost = f"; loops cost {waste_text(now.waste)}" if now.waste is not None and now.waste.calls else ""
    return (f'<div class="run" id="run-{i}"><h3>{esc(now.run_id)} <span class="{verdict}">{verdict}</span> '
            f'<span class="muted">{esc(now.outcome)}, {len(marks)} calls{esc(recorded)}{esc(cost)}</span></h3>'
            f"{svg(t, f'timeline-{i}')}</div>")
