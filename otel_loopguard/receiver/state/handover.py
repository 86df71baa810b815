"""Handing the state directory from a running receiver to its successor without closing the port
(docs/reliability.md, "Restarts without a gap", has the protocol and why each step is there).

Files in the state directory, besides directory.py's:
- `lock`: flocked by the receiver that owns the directory (directory.py); it writes its pid and
  listen address into it, so a successor knows whom to ask to stop and that it means the same
  port.
- `inbox/<pid>/`: one per process that listened before the directory was its own: `lock`
  (flocked by that process for its whole life: whoever can lock it knows the process is gone),
  `listening` (written once its port is bound: the predecessor may stop accepting), and the
  requests it answered meanwhile, in the forward queue's format (spool.py: written before the
  answer). The owner replays them through the normal path (dedupe, forward queue, runs) in
  order, acknowledging each; an inbox whose process died is replayed by the next owner.

Steps, a successor N and the owner O on the same state directory and address:
1. N binds the port beside O (SO_REUSEPORT, which O set too), answers every request by writing
   it to its inbox, writes `listening`, and sends O SIGTERM.
2. O, on SIGTERM, waits (bounded) for an announced successor to be listening, then stops
   accepting, answers what it had in hand, saves its open runs and lets the lock go last, after
   every write (a half-written state is never seen: the lock is not free until it is whole).
3. N takes the lock, restores what O saved (snapshot, queues, dedupe keys), replays the inboxes
   of dead processes, then its own, then serves directly.
A crash anywhere is the crash path (the kernel releases the flocks; spool records torn at the
end were never answered); nothing O saves after N started is missed, because N reads nothing
of the directory until it holds the lock.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path
from typing import Optional

from .spool import Spool

_log = logging.getLogger("otel_loopguard.receiver")

INBOX = "inbox"


def write_owner(fd: int, listen: str) -> None:
    """Into the flocked `lock` file: who owns the directory, and where it listens."""
    data = f"{os.getpid()} {listen}\n".encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def owner(state_dir: Path) -> tuple[Optional[int], str]:
    """The pid and listen address the owner wrote (None, "" when unknown: an older receiver)."""
    try:
        pid, _, listen = (state_dir / "lock").read_text(encoding="utf-8").strip().partition(" ")
        return int(pid), listen
    except (OSError, ValueError):
        return None, ""


def _flock(fd: int) -> None:
    """An exclusive flock, or OSError when another process holds it (no-op where there is no
    fcntl: there one receiver per directory is up to the operator, as in directory.py)."""
    try:
        import fcntl
    except ImportError:
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _held(lock: Path) -> bool:
    """True when a live process holds the flock on `lock`."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        _flock(fd)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # closing drops a lock taken just now
    return False


class Inbox:
    """This process's inbox (see the module docstring): flocked for its life, a spool of requests."""

    def __init__(self, state_dir: Path, fsync: bool = False):
        self.path = state_dir / INBOX / str(os.getpid())
        if self.path.exists():  # a pid reused after a crash: that inbox is an orphan now, replay it later
            self.path.rename(self.path.with_name(f"{os.getpid()}.{os.urandom(4).hex()}"))
        self.path.mkdir(parents=True)
        self._lock = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        _flock(self._lock)
        self.spool = Spool(self.path, fsync=fsync)
        self.spool.recover()

    def listening(self) -> None:
        (self.path / "listening").touch()

    def close(self, remove: bool) -> None:
        """Closed; removed too when every request in it was replayed."""
        self.spool.close()
        if remove:
            shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock)


def orphans(state_dir: Path) -> list[Path]:
    """Inboxes whose process is gone (their requests are replayed by the owner), oldest first."""
    folder = state_dir / INBOX
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and not _held(p / "lock")]
    return sorted(found, key=lambda p: p.stat().st_mtime)


def successor(state_dir: Path) -> Optional[tuple[str, bool]]:
    """A live process other than this one with an inbox here: (its name, listening yet)."""
    folder = state_dir / INBOX
    if not folder.is_dir():
        return None
    for p in folder.iterdir():
        if p.name != str(os.getpid()) and p.is_dir() and _held(p / "lock"):
            return p.name, (p / "listening").exists()
    return None
