"""One run as an inline SVG timeline: sequence across, tool down.

Each call is a square in its tool's row at its place in the run; calls with the same action
digest share a colour (a loop shows as a row of one colour), a failed call has a dark
outline, a call a guard denied is a hollow square with a cross. Findings are bands over the
calls they cite (amber warn, red stop; across every row when no single tool caused them).
Guard decisions are triangles above the call they concern (solid: deny or would_block;
hollow: warn); a dashed line marks the call at which blocking would stop the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from .page import esc

CELL, ROW, LEFT, TOP = 16, 22, 150, 26
MAX_CALLS_DRAWN = 2000  # a longer run is cut, and says so: a page must stay openable
_SEVERITY_FILL = {"warn": "#f4b400", "stop": "#d93025", "info": "#9aa0a6"}


@dataclass(frozen=True)
class Mark:
    """A call in the picture."""

    seq: int
    tool: str
    action: Optional[str]  # digest (None: a denied call was never fingerprinted)
    ok: Optional[bool] = True
    dispatched: bool = True


@dataclass(frozen=True)
class Band:
    kind: str
    severity: str
    first_seq: int
    last_seq: int
    tool: Optional[str]
    reason: str


@dataclass(frozen=True)
class Flag:
    """A guard decision, recorded or worked out (calibrate's stop)."""

    seq: int
    verb: str  # deny, would_block, warn, would_warn, stop
    label: str


@dataclass
class Timeline:
    run_id: str
    calls: list[Mark]
    bands: list[Band] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    stop_seq: Optional[int] = None  # blocking stops here (dashed line)


def colour(digest: Optional[str]) -> str:
    """The same digest, the same colour: a hue from the digest's first hex digits."""
    if not digest:
        return "#ffffff"
    try:
        n = int(digest[:6], 16)
    except ValueError:
        n = sum(map(ord, digest))
    return f"hsl({n % 360},{55 + (n >> 9) % 30}%,{45 + (n >> 14) % 20}%)"


def svg(t: Timeline, element_id: str = "") -> str:
    calls = t.calls[:MAX_CALLS_DRAWN]
    tools = list(dict.fromkeys(c.tool for c in calls))
    x_of = {c.seq: LEFT + i * CELL for i, c in enumerate(calls)}
    y_of = {tool: TOP + i * ROW for i, tool in enumerate(tools)}
    width = LEFT + max(len(calls), 1) * CELL + 20
    height = TOP + max(len(tools), 1) * ROW + 8
    seqs = ",".join(str(c.seq) for c in calls)
    parts = [f'<svg class="timeline" id="{esc(element_id)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" data-run="{esc(t.run_id)}" data-seqs="{seqs}" '
             f'data-x0="{LEFT}" data-cell="{CELL}" role="img" aria-label="timeline of run {esc(t.run_id)}">']
    parts += [f'<text x="4" y="{y + 13}">{esc(_cut(tool))}</text>' for tool, y in y_of.items()]
    parts += _bands(t.bands, x_of, y_of, height)
    parts += [_square(c, x_of[c.seq], y_of[c.tool]) for c in calls]
    parts += _flags(t.flags, x_of)
    stop_x = x_of.get(t.stop_seq) if t.stop_seq is not None else None
    shown = "" if stop_x is not None else ' visibility="hidden"'
    parts.append(f'<line class="stop-mark" x1="{(stop_x or LEFT) - 2}" x2="{(stop_x or LEFT) - 2}" y1="{TOP - 6}" '
                 f'y2="{height - 2}" stroke="#d93025" stroke-width="2" stroke-dasharray="4 3"{shown}>'
                 "<title>blocking would stop here</title></line>")
    if len(t.calls) > len(calls):
        parts.append(f'<text x="{LEFT}" y="12">first {len(calls)} of {len(t.calls)} calls</text>')
    parts.append("</svg>")
    return "".join(parts)


def _bands(bands: Sequence[Band], x_of: dict[int, int], y_of: dict[str, int], height: int) -> list[str]:
    out = []
    for b in bands:
        xs = [x for s, x in x_of.items() if b.first_seq <= s <= b.last_seq]
        if not xs:
            continue
        if b.tool in y_of:
            y, h = y_of[b.tool] - 3, ROW - 2
        else:
            y, h = TOP - 4, height - TOP
        fill = _SEVERITY_FILL.get(b.severity, "#9aa0a6")
        out.append(f'<rect class="band {esc(b.severity)}" x="{min(xs) - 2}" y="{y}" width="{max(xs) - min(xs) + CELL}" '
                   f'height="{h}" fill="{fill}" fill-opacity="0.28" stroke="{fill}">'
                   f"<title>{esc(b.kind)}/{esc(b.severity)}: {esc(b.reason)}</title></rect>")
    return out


def _square(c: Mark, x: int, y: int) -> str:
    size = CELL - 4
    tip = f"call {c.seq} {c.tool}" + (f" {c.action[:12]}" if c.action else "")
    if not c.dispatched:
        return (f'<g class="call denied"><rect x="{x}" y="{y}" width="{size}" height="{size}" fill="#fff" '
                f'stroke="#555"/><path d="M{x} {y}l{size} {size}M{x + size} {y}l-{size} {size}" stroke="#555"/>'
                f"<title>{esc(tip)}: denied, not run</title></g>")
    stroke = ' stroke="#202124" stroke-width="2"' if c.ok is False else ""
    outcome = {True: "ok", False: "error", None: "unknown"}[c.ok]
    return (f'<rect class="call" x="{x}" y="{y}" width="{size}" height="{size}" fill="{colour(c.action)}"{stroke}>'
            f"<title>{esc(tip)} ({outcome})</title></rect>")


def _flags(flags: Sequence[Flag], x_of: dict[int, int]) -> list[str]:
    out = []
    for f in flags:
        x = x_of.get(f.seq)
        if x is None:
            continue
        solid = f.verb in ("deny", "would_block", "stop")
        fill = "#d93025" if solid else "none"
        cx = x + (CELL - 4) / 2
        out.append(f'<path class="decision {esc(f.verb)}" d="M{cx - 5} {TOP - 16}h10l-5 9z" fill="{fill}" '
                   f'stroke="#d93025"><title>{esc(f.verb)}: {esc(f.label)}</title></path>')
    return out


def legend() -> str:
    return ('<p class="legend muted"><span>squares: calls (same colour = same action digest; dark outline = '
            'error; cross = denied)</span><span>bands: findings (amber warn, red stop)</span><span>triangles: '
            'guard decisions (solid = deny / would_block)</span><span>dashed line: blocking stops here</span></p>')


def _cut(text: str, width: int = 22) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"
