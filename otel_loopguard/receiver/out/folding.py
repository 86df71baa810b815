"""Finding spans folded into episodes before they leave together (findings/episodes.py decides).

Spans put on the finding queue at once (one request's findings, one tick's) are folded: a warn
followed by its stop leaves as the stop alone, saying when the warn came
(`loopguard.finding.warned_at_seq`); other kinds over the same calls ride on the primary as
`loopguard.finding` events whose attributes are the finding's own. A warn that left earlier is
named by the stop that follows it (`loopguard.finding.warn_span_id`), and a later finding of an
episode that left names its primary (`loopguard.finding.episode_span_id`).

It also counts what the loops cost (`loop_wasted_*_total{tool,kind}`): per episode only what
its findings add to the calls already counted, so a warn and its stop count the loop once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ...bounded import BoundedMap
from ...findings import INTEGRITY_KINDS, Finding
from ...findings.episodes import Episode, folds_into, overlaps, plan, same_episode, warned_at
from ...findings.otlp import FINDING_SPAN, is_own_span
from ...otlp.values import any_value, attributes, to_key_values
from ..ops.metrics import Metrics

MAX_EPISODES = 10_000  # runs whose episodes that left are remembered for their later findings
MAX_EPISODES_PER_RUN = 8
MAX_EPISODE_FINDINGS = 16
MAX_TOOL_LABELS = 100
WASTE = ("calls", "seconds", "tokens", "cost_usd")
WARNED_AT = "loopguard.finding.warned_at_seq"
WARN_SPAN = "loopguard.finding.warn_span_id"
EPISODE_SPAN = "loopguard.finding.episode_span_id"
EPISODE_KINDS = "loopguard.finding.episode_kinds"


@dataclass
class _Left:
    """An episode that left: its findings (the rule reads them) and its span ids."""

    primary: str
    findings: list[tuple[Finding, str]]
    counted: dict[str, float]


class Folder:
    def __init__(self, metrics: Metrics):
        self._metrics = metrics
        self._left: BoundedMap[str, list[_Left]] = BoundedMap(MAX_EPISODES)
        self._labels: set[str] = set()

    def fold(self, spans: list[Span]) -> list[Span]:
        at = [i for i, s in enumerate(spans) if is_own_span(s.name) and s.name.split(" ", 1)[0] == FINDING_SPAN]
        if not at:
            return spans
        read = [_finding(spans[i]) for i in at]
        findings = [f for f, _ in read]
        mine = [spans[i] for i in at]
        gone: set[int] = set()
        for e in plan(findings):
            gone |= self._one(e, mine, findings, read)
        dropped = {at[g] for g in gone}
        return [s for i, s in enumerate(spans) if i not in dropped]

    def _one(self, e: Episode, spans: list[Span], findings: list[Finding], read: list[tuple[Finding, dict[str, Any]]]) -> set[int]:
        """Folds one episode into its primary span; returns the indices (into `spans`) that go."""
        primary = spans[e.primary]
        extra: dict[str, Any] = {}
        when = warned_at(findings, e.warned)
        if when is not None:
            extra[WARNED_AT] = when
        for m in e.members:
            own = {k: v for k, v in read[m][1].items() if k.startswith("loopguard.")}
            member_when = warned_at(findings, e.member_warned.get(m, ()))
            if member_when is not None:
                own[WARNED_AT] = member_when
            primary.events.add(name=FINDING_SPAN, time_unix_nano=spans[m].start_time_unix_nano,
                               attributes=to_key_values(own))
        if e.members:
            extra[EPISODE_KINDS] = sorted({findings[i].kind for i in (e.primary, *e.members)})
        extra.update(self._before(findings[e.primary], primary, [(findings[i], read[i][1]) for i in (e.primary, *e.members)]))
        if extra:
            primary.attributes.extend(to_key_values(extra))
        return {*e.warned, *e.members, *(w for ws in e.member_warned.values() for w in ws)}

    def _before(self, f: Finding, span: Span, mine: list[tuple[Finding, dict[str, Any]]]) -> dict[str, Any]:
        """Names what of this episode left already (a warn, the primary), and counts its waste."""
        out: dict[str, Any] = {}
        episodes = self._left.get(f.run_id) or []
        left = next((e for e in episodes if any(_related(g, x) for g, _ in e.findings for x, _ in mine)), None)
        if left is not None:
            warn = next((sid for g, sid in left.findings if folds_into(g, f)), None)
            if warn is not None:
                out[WARN_SPAN] = warn
                out[WARNED_AT] = min(g.last_seq for g, sid in left.findings if sid == warn)
            if left.primary != warn:
                out[EPISODE_SPAN] = left.primary
        else:
            left = _Left(primary=span.span_id.hex(), findings=[], counted={})
            if f.kind not in INTEGRITY_KINDS and f.run_id:
                self._left.put(f.run_id, [*episodes, left][-MAX_EPISODES_PER_RUN:])
        left.findings = (left.findings + [(g, span.span_id.hex()) for g, _ in mine])[-MAX_EPISODE_FINDINGS:]
        self._count(f, mine, left)
        return out

    def _count(self, f: Finding, mine: list[tuple[Finding, dict[str, Any]]], left: _Left) -> None:
        """The episode's waste beyond what its earlier spans counted, under the primary's kind."""
        tool = self._label(f.tool)
        for name in WASTE:
            values = [a[f"loopguard.finding.waste.{name}"] for _, a in mine if a.get(f"loopguard.finding.waste.{name}") is not None]
            if not values:
                continue
            value = max(values)
            extra = float(value) - left.counted.get(name, 0.0)
            if extra > 0:
                self._metrics.inc(f"loop_wasted_{name}_total", extra, tool=tool, kind=f.kind)
                left.counted[name] = float(value)

    def _label(self, tool: Optional[str]) -> str:
        """Bounded metric labels: the first tools seen, then "other"."""
        if not tool:
            return ""
        if tool in self._labels or len(self._labels) < MAX_TOOL_LABELS:
            self._labels.add(tool)
            return tool
        return "other"


def _related(earlier: Finding, later: Finding) -> bool:
    """The later finding continues the episode of the earlier one (findings/episodes.py)."""
    return (folds_into(earlier, later) or same_episode(earlier, later)
            or (earlier.kind == later.kind and earlier.tool == later.tool and earlier.action == later.action
                and earlier.kind not in INTEGRITY_KINDS and overlaps(earlier, later)))


def _finding(span: Span) -> tuple[Finding, dict[str, Any]]:
    """The finding a span carries, as the rule reads it, and the span's own attributes (the
    conventions' copies for backends, input and output values, are not read)."""
    attrs = {kv.key: any_value(kv.value) for kv in span.attributes if kv.key.startswith("loopguard.")}
    seqs = tuple(int(attributes(e.attributes).get("loopguard.seq", 0)) for e in span.events if e.name == "loopguard.call")
    f = Finding(kind=str(attrs.get("loopguard.finding.kind", "")),
                severity=str(attrs.get("loopguard.finding.severity", "")),
                first_seq=int(attrs.get("loopguard.finding.first_seq", 0)),
                last_seq=int(attrs.get("loopguard.finding.last_seq", 0)),
                count=int(attrs.get("loopguard.finding.count", 0)), seqs=seqs,
                span_ids=tuple(attrs.get("loopguard.finding.span_ids") or ()),
                reason=str(attrs.get("loopguard.finding.reason", "")),
                tool=attrs.get("loopguard.tool.name"), action=attrs.get("loopguard.args.digest"),
                run_id=str(attrs.get("loopguard.run.id", "")))
    return f, attrs
