"""One mode for the process: whether guards deny, and what `loopguard.mode` says.

Decided in one place, `resolve_mode()`: an explicit argument, else `OTEL_LOOPGUARD_MODE`,
else the mode the latest `install(mode=...)` was given. Guards and the processor's tags
both ask it, so one setting governs both (docs/guard.md, "Mode"). Without any setting a
guard enforces (creating one is the opt-in) and `install()` tags `observe`; the runs an
enforcing guard judged are remembered, so their spans say `enforce` all the same.

Every mode decision is made here: `resolve_mode` (the settings), `GuardMode.current` (a
guard, at each check) and `span_mode` (the tag). Anything that forces a mode for the whole
process belongs in these three; the kill switch (killswitch.py) is applied by the last two.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable, Mapping, Optional

from .bounded import BoundedSet
from .errors import LoopguardError
from .killswitch import effective_mode, observe_only

MODES = ("observe", "enforce")
ENV = "OTEL_LOOPGUARD_MODE"
MAX_ENFORCED_RUNS = 10_000

_installed: Optional[str] = None  # the latest install(mode=...) given explicitly, still running
_installs: list[tuple[object, str]] = []  # every such install not shut down yet, oldest first
_enforced_runs = BoundedSet(MAX_ENFORCED_RUNS)
_lock = threading.Lock()
_log = logging.getLogger("otel_loopguard")
_bad_settings_logged: set[str] = set()  # each bad value of the variable is logged once


class ModeError(LoopguardError):
    """A mode that is neither observe nor enforce; names the setting."""


def check_mode(value: object, setting: str) -> str:
    if value not in MODES:
        raise ModeError(f"{setting}: expected one of {', '.join(MODES)}, got {value!r}")
    return str(value)


def resolve_mode(argument: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The mode in force: the argument, else OTEL_LOOPGUARD_MODE, else install(mode=...);
    None when nothing sets it (the caller's default applies)."""
    if argument is not None:
        return check_mode(argument, "mode")
    raw = (os.environ if env is None else env).get(ENV, "").strip()
    if raw:
        return check_mode(raw, ENV)
    return _installed


def note_installed(mode: str) -> Callable[[], None]:
    """install() was given a mode: guards without a mode of their own follow it until that
    install is shut down (the returned function, called on shutdown, forgets it)."""
    global _installed
    token = object()
    with _lock:
        _installs.append((token, check_mode(mode, "mode")))
        _installed = mode

    def forget() -> None:
        global _installed
        with _lock:
            _installs[:] = [(t, m) for t, m in _installs if t is not token]
            _installed = _installs[-1][1] if _installs else None

    return forget


def note_enforced_run(run_id: str) -> None:
    """An enforcing guard judged this run: its spans are tagged `loopguard.mode=enforce`."""
    with _lock:
        _enforced_runs.add(run_id)


def enforced_run(run_id: str) -> bool:
    return run_id in _enforced_runs


def span_mode(configured: str, run_id: str) -> str:
    """What `loopguard.mode` says on a tool span of `run_id`: `enforce` when an enforcing guard
    judged the run, else the processor's configured mode."""
    return effective_mode("enforce" if run_id in _enforced_runs else configured)


class GuardMode:
    """A guard's mode, asked at every check so a change of setting applies to the next call.

    A bad mode is an error when the guard is made (the argument, or OTEL_LOOPGUARD_MODE then):
    ModeError, naming the setting. A bad value set later never reaches the tool call: the guard
    keeps the last good mode and logs the bad value once (a guard must not break the calls it
    judges because of a typo in the environment)."""

    __slots__ = ("requested", "_last")

    def __init__(self, requested: Optional[str] = None):
        self.requested = None if requested is None else check_mode(requested, "mode")
        self._last = resolve_mode(self.requested) or "enforce"  # raises on a bad variable now

    def current(self) -> str:
        # The kill switch (otel_loopguard.set_mode, OTEL_LOOPGUARD_KILL_SWITCH_FILE) wins over settings.
        if observe_only():
            return "observe"
        try:
            mode = resolve_mode(self.requested) or "enforce"
        except ModeError as exc:
            _log_bad_setting(str(exc), self._last)
            return self._last
        self._last = mode
        return mode


def _log_bad_setting(message: str, kept: str) -> None:
    with _lock:
        if message in _bad_settings_logged or len(_bad_settings_logged) > 100:
            return
        _bad_settings_logged.add(message)
    _log.error("otel-loopguard: %s; guards keep the mode %s until it is fixed (docs/guard.md, \"Mode\")", message, kept)


__all__ = ["ENV", "MODES", "GuardMode", "ModeError", "check_mode", "enforced_run", "note_enforced_run",
           "note_installed", "resolve_mode", "span_mode"]
