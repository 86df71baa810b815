"""The runtime kill switch: force observe-only without a deploy (docs/guard.md, "Kill switch").

Either is enough to switch every guard and the processor of this process to observe-only:
- `otel_loopguard.set_mode("observe")` (from an admin endpoint, a feature flag's callback);
- the file named by `OTEL_LOOPGUARD_KILL_SWITCH_FILE` exists (a ConfigMap key, `touch` on the host).

While it is on, guards decide as before but deny nothing (a deny is recorded as `would_block`,
warn nudges are not added) and the processor tags `loopguard.mode=observe`. The switch can
only take enforcement away: `set_mode("enforce")` lifts what `set_mode("observe")` did, it
never makes an observe-only guard enforce, and the file beats it.

`observe_only()` is on the guard's per-call path: it reads a flag and the clock, and looks
at the file at most once a second (a stat costs microseconds; a guard checks far more often).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Mapping, Optional

ENV_FILE = "OTEL_LOOPGUARD_KILL_SWITCH_FILE"
CHECK_SECONDS = 1.0
MODES = ("observe", "enforce")

_log = logging.getLogger("otel_loopguard")


class KillSwitch:
    def __init__(self, env: Optional[Mapping[str, str]] = None, clock: Callable[[], float] = time.monotonic,
                 interval: float = CHECK_SECONDS):
        self._env = os.environ if env is None else env
        self._clock = clock
        self._interval = interval
        self._forced = False  # set_mode("observe")
        self._file_on = False  # the file existed at the last look
        self._next_look = float("-inf")
        self._lock = threading.Lock()  # only around a look at the file: one thread stats, the others read

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        forced = mode == "observe"
        if forced != self._forced:
            _log.warning("otel-loopguard: %s", "set_mode('observe'): observe-only until set_mode('enforce')"
                         if forced else "set_mode('enforce'): configured enforcement restored")
        self._forced = forced

    def observe_only(self) -> bool:
        if self._forced:
            return True
        if self._clock() >= self._next_look:
            self._look()
        return self._file_on

    def mode(self, configured: str) -> str:
        """The mode in effect for something configured as `configured`."""
        return "observe" if self.observe_only() else configured

    def _look(self) -> None:
        if not self._lock.acquire(blocking=False):
            return  # another thread is looking: its answer is as fresh as ours would be
        try:
            self._next_look = self._clock() + self._interval
            path = self._env.get(ENV_FILE)
            on = bool(path) and os.path.exists(path)  # type: ignore[arg-type]
            if on != self._file_on:
                # The path is the operator's own setting, no secret: naming it says where to look.
                _log.warning("otel-loopguard kill switch %s: %s", "ON, observe-only" if on else "off",
                             f"{path} exists" if on else f"{path or ENV_FILE} is gone or unset")
            self._file_on = on
        finally:
            self._lock.release()


SWITCH = KillSwitch()


def set_mode(mode: str) -> None:
    """`"observe"`: every guard and the processor of this process go observe-only at once;
    `"enforce"`: back to what each was configured with (the kill-switch file still wins)."""
    SWITCH.set_mode(mode)


def observe_only() -> bool:
    return SWITCH.observe_only()


def effective_mode(configured: str) -> str:
    """`"observe"` while the switch is on, else `configured` (what the processor tags)."""
    return SWITCH.mode(configured)
