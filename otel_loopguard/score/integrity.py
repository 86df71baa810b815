"""Trace integrity, checked before any scoring.

Telemetry retries are not agent loops, and missing evidence is not a clean run:
- the same record twice (same span id, or same call id, same content) is one
  call: deduplicated and reported as `telemetry_duplicate` (info);
- the same span id or call id with different content, two calls claiming one
  sequence number, or digests under different key ids: `integrity_error`;
- a call that never finished, or a gap in a sequence its source promises to number
  1..N (`dense`: the processor's marked `loopguard.seq`, or the caller's say-so):
  `incomplete_trace`. Other sequences (NDJSON records, hand-numbered spans) only order
  calls: 10, 20, 30 are three calls in a row, as the runtime dispatched them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Hashable, Iterable, Optional

from ..calls import RawCall
from ..findings import INFO, WARN, Finding

SCORED, INCOMPLETE, INTEGRITY_ERROR = "scored", "incomplete_trace", "integrity_error"


@dataclass(frozen=True)
class Integrity:
    outcome: str
    calls: list[RawCall]  # unique, in sequence order
    findings: list[Finding]


def check(calls: Iterable[RawCall], dense: bool = False) -> Integrity:
    """`dense`: treat every sequence as numbered 1..N with no gap, whatever its source says."""
    unique, dup_findings, conflicts = _dedupe(calls)
    unique.sort(key=lambda c: c.seq)
    conflicts += _sequence_conflicts(unique) + _key_conflicts(unique)
    if conflicts:
        return Integrity(INTEGRITY_ERROR, unique, dup_findings + conflicts)
    missing = _incomplete(unique, dense or is_dense(unique))
    if missing:
        return Integrity(INCOMPLETE, unique, dup_findings + missing)
    return Integrity(SCORED, unique, dup_findings)


def _identity(call: RawCall) -> list[Hashable]:
    ids: list[Hashable] = []
    if call.span_id:
        ids.append(("span", call.span_id))
    if call.call_id:
        ids.append(("call", call.call_id))
    return ids


def _dedupe(calls: Iterable[RawCall]) -> tuple[list[RawCall], list[Finding], list[Finding]]:
    first_by_id: dict[Hashable, RawCall] = {}
    unique: list[RawCall] = []
    dups: list[Finding] = []
    conflicts: list[Finding] = []
    for call in calls:
        earlier = next((first_by_id[i] for i in _identity(call) if i in first_by_id), None)
        if earlier is None:
            unique.append(call)
            for i in _identity(call):
                first_by_id[i] = call
        elif _same_content(earlier, call):
            dups.append(_about("telemetry_duplicate", INFO, [call], _dup_reason(call)))
        else:
            conflicts.append(_about("integrity_conflict", WARN, [earlier, call], _conflict_reason(earlier, call)))
    return unique, dups, conflicts


def _same_content(a: RawCall, b: RawCall) -> bool:
    # A re-delivered record may carry another span id only if it has none of its own.
    return a == b or replace(a, span_id=None) == replace(b, span_id=None) and not (a.span_id and b.span_id)


def _dup_reason(call: RawCall) -> str:
    ident = call.span_id or call.call_id
    return f"call {call.seq} ({ident}) was delivered more than once; counted once (a telemetry retry, not a repeated call)"


def _conflict_reason(a: RawCall, b: RawCall) -> str:
    ident = f"span id {a.span_id}" if a.span_id and a.span_id == b.span_id else f"call id {a.call_id}"
    return f"two different records share {ident} (sequences {a.seq} and {b.seq}); the trace cannot be trusted"


def _sequence_conflicts(calls: list[RawCall]) -> list[Finding]:
    out = []
    for before, after in zip(calls, calls[1:]):
        if before.seq == after.seq:
            reason = f"two different calls claim sequence {after.seq}: the dispatch order is unknown"
            out.append(_about("integrity_conflict", WARN, [before, after], reason))
    return out


def _key_conflicts(calls: list[RawCall]) -> list[Finding]:
    key_ids = sorted({c.key_id for c in calls if c.key_id})
    if len(key_ids) < 2:
        return []
    reason = f"digests under different key ids ({', '.join(key_ids)}) cannot be compared"
    return [_about("integrity_conflict", WARN, calls[:1], reason)]


def is_dense(calls: list[RawCall]) -> bool:
    """Every call comes from a source that numbers its run 1..N (a run mixing sources does
    not promise that its numbers meet)."""
    return bool(calls) and all(c.seq_dense for c in calls)


def _incomplete(calls: list[RawCall], dense: bool) -> list[Finding]:
    out: list[Finding] = []
    gaps = _gaps([c.seq for c in calls]) if dense else None
    if gaps is not None:
        first, last, count, listed = gaps
        shown = ", ".join(map(str, listed)) + (" ..." if count > len(listed) else "")
        reason = f"{count} call{'s' if count > 1 else ''} missing from the trace ({shown}): progress cannot be judged"
        out.append(_about("incomplete_trace", WARN, [], reason, first=first, last=last, count=count))
    unfinished = [c for c in calls if not c.finished]
    if unfinished:
        shown = ", ".join(str(c.seq) for c in unfinished[:10])
        reason = f"calls {shown} started but never finished: their results are unknown"
        out.append(_about("incomplete_trace", WARN, unfinished, reason))
    return out


def _gaps(seqs: list[int]) -> Optional[tuple[int, int, int, list[int]]]:
    """The missing numbers of the dispatch order 1..max (sequences are 1-based): first, last,
    how many, and the first ten. Counted gap by gap, never materialised (a sequence number
    of 10**15 is one gap, not a list)."""
    first = last = count = 0
    listed: list[int] = []
    previous = 0
    for seq in seqs:  # sorted
        if seq > previous + 1:
            first = first or previous + 1
            last = seq - 1
            count += seq - previous - 1
            listed.extend(range(previous + 1, min(seq, previous + 1 + 10 - len(listed))))
        previous = max(previous, seq)
    return (first, last, count, listed) if count else None


def _about(
    kind: str,
    severity: str,
    calls: list[RawCall],
    reason: str,
    *,
    first: Optional[int] = None,
    last: Optional[int] = None,
    count: Optional[int] = None,
) -> Finding:
    seqs = tuple(c.seq for c in calls)
    return Finding(
        kind=kind,
        severity=severity,
        first_seq=first if first is not None else (min(seqs) if seqs else 0),
        last_seq=last if last is not None else (max(seqs) if seqs else 0),
        count=count if count is not None else len(calls),
        seqs=seqs,
        span_ids=tuple(c.span_id for c in calls),
        reason=reason,
        tool=calls[0].tool if calls and len({c.tool for c in calls}) == 1 else None,
    )
