"""The guard's worker: fingerprints recorded calls off the application's thread.

A hint, never the record: every queued call also waits in its run (guard.py), and a check
finishes what the worker has not reached. So a full queue, a stopped worker or a fork only
move the work back onto the application's thread; nothing is dropped.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import weakref
from typing import Any, Callable, Optional

QUEUE_CAP = 1024
# The thread ends when it has had nothing to do for this long and starts again with the next
# call: a guard made and forgotten (tests, short scripts) leaves no thread behind.
IDLE_SECONDS = 5.0

_log = logging.getLogger("otel_loopguard.guard")


class GuardWorker:
    """Runs `work(job)` for each offered job on one daemon thread, in the order offered."""

    def __init__(self, work: Callable[[Any], None], cap: int = QUEUE_CAP, idle_seconds: float = IDLE_SECONDS):
        self._work = work
        self._cap = cap
        self._idle = idle_seconds
        self._stopped = False
        self.errors = 0
        self._reset()
        if hasattr(os, "register_at_fork"):
            # A forked child has no thread: its jobs are the runs' own to finish (weakly: the
            # hook must not keep a discarded guard's worker alive).
            reinit = weakref.WeakMethod(self._reset)
            os.register_at_fork(after_in_child=lambda: (m := reinit()) is not None and m())

    def _reset(self) -> None:
        self._jobs: collections.deque[Any] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._thread: Optional[threading.Thread] = None

    def offer(self, job: Any) -> bool:
        """Queue `job`; False when the queue is full or the worker stopped (do it yourself)."""
        with self._cond:
            if self._stopped or len(self._jobs) >= self._cap:
                return False
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="otel-loopguard-guard", daemon=True)
                self._thread.start()
            else:
                self._cond.notify()
        return True

    def stop(self) -> None:
        """No more jobs are taken; the thread ends after the job it runs (queued ones stay
        with their runs, finished by the next check)."""
        with self._cond:
            self._stopped = True
            self._jobs.clear()
            self._cond.notify()

    @property
    def alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._jobs and not self._stopped:
                    self._cond.wait(self._idle)
                if not self._jobs or self._stopped:
                    self._thread = None
                    return
                job = self._jobs.popleft()
            try:
                self._work(job)
            except Exception:  # never into the application; the run's check does the job again
                self.errors += 1
                if self.errors <= 10:
                    _log.exception("the guard's worker failed on a recorded call; the next check does it")
