"""Going on where a previous process stopped (`state_dir`): what it left is fed to the new run
assembler before the first request, and the rule for runs its restart cut applies after.

The open runs of a clean shutdown come back from the snapshot (snapshot.py) with its late
cache; the requests a crash left unjudged are fed to the detectors again (judged.py); then the
rule for runs it may have cut (restart.py) spares the runs rebuilt here.
"""

from __future__ import annotations

import logging
import time
from typing import Optional

from ..config import ReceiverConfig
from ..runs.assembly import RunAssembler
from ..runs.restart import RestartRule
from ..state import snapshot
from ..state.directory import Opened
from ..state.judged import CompletedRuns, JudgedLog
from ..state.spool import Recovered, Ref
from ..front.service import parse_request

_log = logging.getLogger("otel_loopguard.receiver")


def judged_log(state: Opened) -> tuple[Optional[JudgedLog], dict[str, Ref]]:
    """With the forward queue on disk: which requests still feed open runs (judged.py), and the
    runs the previous process completed, each with the last request written by then."""
    if state.spool is None:
        return None, {}
    completed = CompletedRuns(state.state.path / "completed-runs")
    done = completed.load()
    return JudgedLog(state.spool, completed=completed), done


def restore(config: ReceiverConfig, state: Opened, judged: Optional[JudgedLog], done: dict[str, Ref],
            assembler: RunAssembler) -> RestartRule:
    """Feed `assembler` what the previous process left; the rule for the runs that follow."""
    header = snapshot.load(state.state.path, assembler.fingerprinter, time.monotonic(), assembler.adopt)
    if header is not None:
        assembler.restore_late_cache(header.late_runs, header.late_traces, time.monotonic())
    if judged is not None:
        _judge_again(config, assembler, judged, state.recovered, done)
    # Known exactly what the previous process had (a snapshot, or a queue that keeps requests
    # until judged): only its runs judged or cut are marked when they go on here. Otherwise
    # span start times decide (restart.py).
    known = set(done) | set(header.cut if header is not None else ())
    return RestartRule(previous_alive_ns=state.state.previous_alive_ns, started_at=time.monotonic(),
                       window_seconds=config.restart_window_seconds,
                       clean=header is not None or state.spool is not None, known_cut=frozenset(known))


def _judge_again(config: ReceiverConfig, assembler: RunAssembler, judged: JudgedLog, recovered: list[Recovered],
                 done: dict[str, Ref]) -> None:
    """Requests a crash left unjudged, fed to the detectors again in their order (judged.py),
    without the spans of runs completed before the crash (`done`). Their findings were queued
    (on disk) before the crash: the replay's are not sent again."""
    again = [r for r in recovered if not r.judged]
    for r in again:
        spans = [d for d in parse_request(r.payload, config.run_id_attribute).spans
                 if d.run_id is None or not _before(r.ref, done.get(d.run_id))]
        assembler.accept(spans)
        judged.fed(r.ref, {d.run_id for d in spans if d.run_id in assembler.runs})
    for buffer in assembler.runs.values():
        buffer.restored = True  # whole again: not runs that began before this process (restart.py)
    if again:
        _log.info("state dir: %d accepted requests of %d runs still open at the crash fed to the detectors again",
                  len(again), len(assembler.runs))


def _before(ref: Ref, upto: Optional[Ref]) -> bool:
    return upto is not None and (ref.segment, ref.offset) <= (upto.segment, upto.offset)
