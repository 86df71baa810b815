"""Runs a receiver restart cut in two: never scored as if they were whole.

A receiver keeps open runs in memory. When it stops, or crashes, a run still going on is cut:
the stopping process saw its first part, the next process sees the rest. Two rules make sure
neither part is scored as a passing run (both say `incomplete_trace`, docs/reliability.md):

1. **At shutdown** (SIGTERM, SIGINT): every open run is judged on what arrived and marked
   `incomplete_trace` ("the receiver stopped before the run ended"), unless its root span has
   ended already (then the run is whole, only its grace period was left). Findings it raised
   stand: a loop already seen is reported either way.

2. **After a crash** (with a `state_dir`, which tells the new process until when its
   predecessor was alive, `alive_ns`): a run is marked `incomplete_trace` ("it began before
   this receiver started ...") when
   - the run was opened (its first span arrived) within `restart_window_seconds` of this
     process's start, and
   - one of its spans *started* (the span's own start time) no later than `alive_ns` plus
     one heartbeat: the run was under way while the previous receiver still took spans, so
     that receiver may hold earlier spans of it (a crash: its judgement is gone; a shutdown:
     rule 1 judged that part apart).
   This needs nothing from the app: no processor, no sequence numbers. Runs that begin after
   the restart are never marked (every span of theirs started after `alive_ns`), nor are runs
   first seen after the window (a conversation resumed much later is a new run, as without a
   restart). A span of an old run that shows up only after the window does not mark it.
   When the previous process left an exact account, start times are not needed: after a
   clean shutdown the snapshot restores its open runs and late cache and names the runs rule 1
   cut; after a crash with the forward queue on disk, its open runs are rebuilt from the queue
   (judged.py) and the runs it completed are listed. Then only runs it judged or cut are marked
   when spans of theirs arrive here; any other run is whole or new.
   Without a state directory the new process cannot tell a restart from a first start, and
   spans replayed from an old recording would look like a cut run: the rule is off, and only
   the sequence numbers of the processor (a gap) mark a run cut by a crash.

Clock skew between the app's host and the receiver's moves the boundary by the skew; a run
marked by mistake is only kept out of the score, never reported as a loop.
"""

from __future__ import annotations

from typing import Optional

HEARTBEAT_SECONDS = 0.25  # the state directory's `alive` stamp is rewritten at every tick
CUT_AT_SHUTDOWN = ("the receiver stopped before the run ended: judged on the calls that arrived until then, "
                   "so the run is not scored")


class RestartRule:
    """Rule 2 above; pure: times in, a verdict out.

    When the previous process left an exact account (`clean`): a snapshot at a clean shutdown
    (its open runs restored, its late cache, the runs it judged as cut), or, after a crash, a
    forward queue that keeps each request until its runs are judged (its open runs rebuilt,
    the runs it completed listed), only the runs it judged or cut (`known_cut`) are marked
    when they go on here; start times are not needed."""

    def __init__(self, *, previous_alive_ns: Optional[int], started_at: float, window_seconds: float,
                 clean: bool = False, known_cut: frozenset[str] = frozenset()):
        self._boundary = None if previous_alive_ns is None else previous_alive_ns + int(HEARTBEAT_SECONDS * 2e9)
        self._until = started_at + window_seconds
        self._clean = clean
        self._known_cut = known_cut

    @property
    def active(self) -> bool:
        return self._boundary is not None

    def cut(self, opened_at: float, span_start_ns: int, run_id: str = "") -> bool:
        """Whether a span that started at `span_start_ns` shows its run (opened at `opened_at`,
        on the monotonic clock) to have begun while the previous receiver was alive."""
        if self._boundary is None or opened_at > self._until:
            return False
        if self._clean:
            return run_id in self._known_cut
        return 0 < span_start_ns <= self._boundary

    def reason(self) -> str:
        return ("the run began before this receiver started, while the previous receiver still took spans: "
                "its earlier spans may have been judged there (or lost with it), so the run is not scored")
