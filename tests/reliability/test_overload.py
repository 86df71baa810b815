"""Overload: memory levels off within the configured bound, and returns after each burst.

A real receiver process (`otel-loopguard serve --memory-limit-mib 128`) is flooded by senders
that each send their next batch as soon as the last is answered (every span new, a quarter of
the traces agent runs that never complete), twice, with a quiet spell after each. Asserted in
terms of the bound, never of time: resident memory above the idle process's stays within the
bound in both bursts, and after each quiet spell at most half of its peak above idle is left
(measured: a quarter; nine tenths before receiver/ops/trim.py's release, two thirds with it on
CPython's own allocator, PYTHONMALLOC=pymalloc: docs/reliability.md); the
receiver's own estimate comes back down to what its bounded side tables keep; every span
accepted reaches the backend once; open runs that never complete were judged early rather
than refusing every sender.
"""

from __future__ import annotations

from pathlib import Path

from collector import scenarios as S

from .flood import SPANS_PER_REQUEST, overload

LIMIT_MIB = 128


def test_memory_levels_off_within_the_bound_and_nothing_accepted_is_lost(tmp_path: Path) -> None:
    env = S.receiver_env()
    env["OTEL_LOOPGUARD_DEDUPE_SECONDS"] = "5"  # entries expire within the quiet spell
    env["OTEL_LOOPGUARD_LATE_CACHE_SECONDS"] = "5"  # and so do the side tables'
    env.pop("PYTHONMALLOC", None)  # serve's own choice (receiver/ops/trim.py)
    result = overload(tmp_path, env, limit_mib=LIMIT_MIB, seconds=12, quiet=8, bursts=2, senders=6)
    row = result.row()
    first, second = result.bursts
    # the flood was real: far more spans than the bound's quarter of dedupe entries holds
    assert result.counts.offered_requests * SPANS_PER_REQUEST > 2 * (LIMIT_MIB << 20) // 4 // 240, row
    assert result.runs_shed > 0, row  # never-completing runs were judged early...
    assert result.counts.other_errors == {} and result.counts.too_large == 0, row
    # ... and nothing accepted was lost or delivered twice
    assert result.lost == 0 and result.duplicates == 0, row
    # resident memory above the idle process's stays within the bound, burst after burst
    assert all(b.peak_mib - result.baseline_mib <= LIMIT_MIB for b in (first, second)), row
    # the receiver's estimate returns to what its side tables keep (an eighth of the bound)...
    assert all(b.estimate_after <= (LIMIT_MIB << 20) / 8 for b in (first, second)), row
    # ... and so does resident memory: at most half of the burst's peak above idle stays
    idle = result.baseline_mib
    assert all(b.after_mib - idle <= (b.peak_mib - idle) / 2 for b in (first, second)), row
