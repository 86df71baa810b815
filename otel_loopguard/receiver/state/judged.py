"""Which accepted requests still matter to an open run (`state_dir` with a forward queue).

A crash takes the open runs with it, and the spans of a run may all have reached the process
that crashed: nothing of it would arrive again, and the run would never be judged. So a request
written to the forward queue's spool (spool.py) is kept there, after its delivery, until it is
JUDGED: until every run it fed has been completed and that run's findings queued (and, the
finding queue having a spool of its own, written to disk). At start, the requests not judged are
fed to the detectors again, in the order they were first accepted, and the runs they rebuild go
on as if the process had never stopped; their findings from before the crash were queued on disk
already, so the replay's findings are not sent again.

One request feeds many runs, and some of them may be complete when another is not: the ids of
completed runs go to `completed-runs/` (two generations of COMPLETED_PER_GENERATION ids), each
with the last request written by then, and the replay leaves out their spans in that request
and the ones before it, so no run is judged twice (a run id seen again in later requests is a
new run, as a conversation that resumes). The same list tells the next process which runs this
one judged: every other run it sees after a crash either was rebuilt here or is new
(restart.py).

Bounds: at most MAX_TRACKED requests wait for their runs; past that the oldest is let go (a run
open that long is then judged as a cut run after a crash, restart.py). A run's requests are
let go when it completes.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Iterable, Optional

from .spool import JUDGED, Ref, Spool, write_all

MAX_TRACKED = 200_000
COMPLETED_PER_GENERATION = 100_000


class CompletedRuns:
    """Run ids completed while a request of theirs was still kept, with the last request written
    then (`run id<TAB>segment<TAB>offset`, one a line), in two generations: when the one written
    holds `size` ids the other is emptied and written next."""

    def __init__(self, directory: Path, size: int = COMPLETED_PER_GENERATION):
        self._dir = directory
        self._size = size
        directory.mkdir(parents=True, exist_ok=True)
        self._gen, self._count, self._fd = 0, 0, -1

    def load(self) -> dict[str, Ref]:
        out: dict[str, Ref] = {}
        counts, stamps = [0, 0], [0.0, 0.0]
        for gen in (0, 1):
            path = self._dir / f"{gen}.log"
            try:
                text = path.read_bytes().decode("utf-8", "replace")
                stamps[gen] = path.stat().st_mtime
            except FileNotFoundError:
                continue
            lines = text.split("\n")[:-1]  # a line without its newline was cut by the crash
            for line in lines:
                run_id, _, where = line.rpartition("\t")
                run_id, _, segment = run_id.rpartition("\t")
                if segment.isdigit() and where.isdigit():
                    ref = Ref(int(segment), int(where))
                    out[run_id] = max(ref, out.get(run_id, ref), key=lambda r: (r.segment, r.offset))
            counts[gen] = len(lines)
        self._gen = 0 if stamps[0] >= stamps[1] else 1
        self._count = counts[self._gen]
        self._fd = os.open(self._dir / f"{self._gen}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return out

    def add(self, run_id: str, upto: Ref) -> None:
        if self._count >= self._size:
            os.close(self._fd)
            self._gen = 1 - self._gen
            self._fd = os.open(self._dir / f"{self._gen}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                               0o600)
            self._count = 0
        line = f"{run_id.replace(chr(10), ' ')}\t{upto.segment}\t{upto.offset}\n"
        write_all(self._fd, line.encode("utf-8"))
        self._count += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class JudgedLog:
    def __init__(self, spool: Spool, max_tracked: int = MAX_TRACKED, completed: Optional[CompletedRuns] = None):
        self._spool = spool
        self._completed_log = completed
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
            if self._completed_log is not None and self._spool.last is not None:
                self._completed_log.add(run_id, self._spool.last)
            for ref in self._by_run.pop(run_id, ()):
                runs = self._waiting.get(ref)
                if runs is None:
                    continue
                runs.discard(run_id)
                if not runs:
                    del self._waiting[ref]
                    self._spool.ack(ref, JUDGED)

    def close(self) -> None:
        if self._completed_log is not None:
            self._completed_log.close()

    def all_judged(self) -> None:
        """At shutdown, once the open runs are saved in a snapshot: nothing needs replaying."""
        for ref in self._waiting:
            self._spool.ack(ref, JUDGED)
        self._waiting.clear()
        self._by_run.clear()
        self._completed.clear()
