"""One loop, one finding to read: which findings describe the same episode (pure).

Two rules, applied in this order to the findings of one batch (a run's findings in audit, the
findings that leave the receiver together):

1. A warn is folded into a stop of the same kind about the same action (same tool and
   digest) whose calls overlap the warn's and go no earlier: the stop says when the warn came
   (its last call), the warn is not shown apart.
2. Findings of different kinds about the same tool that share an offending call (a `repeat`
   and the `no_progress` over the same calls) are one episode: the most severe is its primary
   (ties: the kind listed first in KINDS, then the earliest), the others ride on it.

Never folded or grouped: integrity kinds (they describe the telemetry), findings of different
runs or tools, and calls that do not overlap (two separate loops of one action stay two
findings). Only loop kinds group (LOOP_KINDS); a budget on the same call stays apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from .model import INTEGRITY_KINDS, KINDS, SEVERITY_RANK, STOP, WARN, Finding

# Kinds that describe an agent going round; only they group into one episode (a budget or cap
# reached on the same call is another matter, told apart).
LOOP_KINDS = frozenset({"repeat", "cycle", "no_progress", "error_streak", "poll_budget"})


@dataclass(frozen=True, kw_only=True)
class Episode:
    """Indices into the findings given to plan(): `primary` is shown; `warned` are warns folded
    into it; `members` are the episode's other findings (each with its own folded warns)."""

    primary: int
    warned: tuple[int, ...] = ()
    members: tuple[int, ...] = ()
    member_warned: dict[int, tuple[int, ...]] = field(default_factory=dict)


def overlaps(a: Finding, b: Finding) -> bool:
    """The two name a common offending call (by span id where both have them, else by seq)."""
    ids_a, ids_b = {s for s in a.span_ids if s}, {s for s in b.span_ids if s}
    if ids_a and ids_b:
        return not ids_a.isdisjoint(ids_b)
    return not set(a.seqs).isdisjoint(b.seqs)


def folds_into(warn: Finding, stop: Finding) -> bool:
    """Rule 1: `warn` is the early word of `stop` (the same action, or both about the run)."""
    return (warn.severity == WARN and stop.severity == STOP and warn.kind == stop.kind
            and warn.kind not in INTEGRITY_KINDS and warn.run_id == stop.run_id
            and warn.tool == stop.tool and warn.action == stop.action
            and warn.first_seq <= stop.last_seq and stop.first_seq <= warn.last_seq
            and warn.last_seq <= stop.last_seq)


def same_episode(a: Finding, b: Finding) -> bool:
    """Rule 2: different loop kinds over the same calls, of one tool where both name one
    (`no_progress` names none: it joins the loop whose calls it shares)."""
    return (a.kind != b.kind and a.kind in LOOP_KINDS and b.kind in LOOP_KINDS and a.run_id == b.run_id
            and (not a.tool or not b.tool or a.tool == b.tool) and overlaps(a, b))


def plan(findings: Sequence[Finding]) -> list[Episode]:
    """Every finding lands in exactly one episode, as its primary, a member or a folded warn.
    Episodes come in the order of their first finding."""
    warned = _fold(findings)
    folded = {w for ws in warned.values() for w in ws}
    groups: list[list[int]] = []
    by_call: dict[tuple[str, object], list[int]] = {}  # (run, call) -> the groups naming that call
    for i, f in enumerate(findings):
        if i in folded:
            continue
        calls = _calls(f) if f.kind in LOOP_KINDS else []
        near = dict.fromkeys(g for c in calls for g in by_call.get(c, ()))  # only groups sharing a call
        home = next((g for g in near if any(same_episode(findings[j], f) for j in groups[g])), None)
        if home is None:
            home = len(groups)
            groups.append([i])
        else:
            groups[home].append(i)
        for c in calls:
            if home not in by_call.setdefault(c, []):
                by_call[c].append(home)
    return [_episode(g, findings, warned) for g in groups]


def _calls(f: Finding) -> list[tuple[str, object]]:
    """The calls a finding names, as overlaps() compares them: by span id, and by seq."""
    return [(f.run_id, s) for s in f.span_ids if s] + [(f.run_id, n) for n in f.seqs]


def _fold(findings: Sequence[Finding]) -> dict[int, list[int]]:
    """stop index -> the warns folded into it (each warn into the first stop it fits)."""
    # Stops by the calls they name: a warn looks only at the stops sharing one of its calls.
    stops: dict[tuple[str, str, Optional[str], Optional[str], int], list[int]] = {}
    for i, f in enumerate(findings):
        if f.severity == STOP:
            for seq in _seqs(f):
                stops.setdefault((f.run_id, f.kind, f.tool, f.action, seq), []).append(i)
    out: dict[int, list[int]] = {}
    for i, f in enumerate(findings):
        if f.severity != WARN:
            continue
        near = dict.fromkeys(s for seq in _seqs(f) for s in stops.get((f.run_id, f.kind, f.tool, f.action, seq), ()))
        stop = next((s for s in sorted(near) if folds_into(f, findings[s])), None)
        if stop is not None:
            out.setdefault(stop, []).append(i)
    return out


def _seqs(f: Finding) -> set[int]:
    return {*f.seqs, f.first_seq, f.last_seq}


def _episode(group: list[int], findings: Sequence[Finding], warned: dict[int, list[int]]) -> Episode:
    primary = min(group, key=lambda i: _rank(findings[i], i))
    members = tuple(i for i in group if i != primary)
    return Episode(primary=primary, warned=tuple(warned.get(primary, ())), members=members,
                   member_warned={m: tuple(warned[m]) for m in members if m in warned})


def _rank(f: Finding, i: int) -> tuple[int, int, int, int]:
    order = KINDS.index(f.kind) if f.kind in KINDS else len(KINDS)
    return (-SEVERITY_RANK.get(f.severity, 0), order, f.first_seq, i)


def warned_at(findings: Sequence[Finding], warns: Sequence[int]) -> Optional[int]:
    """When the first folded warn came: its last call."""
    return min((findings[w].last_seq for w in warns), default=None)
