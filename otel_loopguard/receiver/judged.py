"""Which accepted requests still matter to an open run (`state_dir` with a forward queue).

A crash takes the open runs with it, and the spans of a run may all have reached the process
that crashed: nothing of it would arrive again, and the run would never be judged. So a request
written to the forward queue's spool (spool.py) is kept there, after its delivery, until it is
JUDGED: until every run it fed has been completed and that run's findings queued (and, the
finding queue having a spool of its own, written to disk). At start, the requests not judged are
fed to the detectors again, in the order they were first accepted, and the runs they rebuild go
on as if the process had never stopped; their findings from before the crash were queued on disk
already, so the replay's findings are not sent again.

Bounds: at most MAX_TRACKED requests wait for their runs; past that the oldest is let go (a run
open that long is then judged as a cut run after a crash, restart.py). A run's requests are
let go when it completes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

from .spool import JUDGED, Ref, Spool

MAX_TRACKED = 200_000


class JudgedLog:
    def __init__(self, spool: Spool, max_tracked: int = MAX_TRACKED):
        self._spool = spool
        self._max = max_tracked
        self._waiting: OrderedDict[Ref, set[str]] = OrderedDict()  # request -> open runs it fed
        self._by_run: dict[str, set[Ref]] = {}
        self._completed: list[str] = []  # completed, findings not yet queued: acknowledged at settle()

    def fed(self, ref: Ref, open_runs: Iterable[str]) -> None:
        """A request was accepted and fed these runs (those still open after it)."""
        runs = set(open_runs)
        if not runs:
            self._spool.ack(ref, JUDGED)
            return
        self._waiting[ref] = runs
        for run_id in runs:
            self._by_run.setdefault(run_id, set()).add(ref)
        while len(self._waiting) > self._max:
            old, old_runs = self._waiting.popitem(last=False)
            for run_id in old_runs:
                self._by_run.get(run_id, set()).discard(old)
            self._spool.ack(old, JUDGED)

    def completed(self, run_id: str) -> None:
        """A run was completed; its findings are about to be queued (then settle())."""
        if run_id in self._by_run:
            self._completed.append(run_id)

    def settle(self) -> None:
        """The completed runs' findings are queued: their requests are judged."""
        completed, self._completed = self._completed, []
        for run_id in completed:
            for ref in self._by_run.pop(run_id, ()):
                runs = self._waiting.get(ref)
                if runs is None:
                    continue
                runs.discard(run_id)
                if not runs:
                    del self._waiting[ref]
                    self._spool.ack(ref, JUDGED)

    def all_judged(self) -> None:
        """At shutdown, once the open runs are saved in a snapshot: nothing needs replaying."""
        for ref in self._waiting:
            self._spool.ack(ref, JUDGED)
        self._waiting.clear()
        self._by_run.clear()
        self._completed.clear()
