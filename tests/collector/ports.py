"""Ports for the Collector tests' processes that no other process on the machine is handed.

live.free_port() binds port 0, closes it and hands the number on: until the child binds it,
the kernel may give the same number to anyone asking for an ephemeral port (a test running at
the same time in another worktree, any outgoing connection). Seen once: the Collector's
metrics port "address already in use" under concurrent runs. These ports come from below the
ephemeral range, where the kernel never picks on its own, and each is claimed by an flock on a
file named after it, held until this test process exits: concurrent test processes that use
this module never pick the same port, and a port some other program listens on is skipped.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import tempfile
from pathlib import Path

LOCKS = Path(tempfile.gettempdir()) / "otel-loopguard-test-ports"
LOWEST = 20000
_held: dict[int, int] = {}  # port -> the fd whose flock claims it (closed when the process exits)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no obstacle
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _claim(port: int) -> bool:
    import fcntl

    fd = os.open(LOCKS / str(port), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    _held[port] = fd
    return True


def reserved_port() -> int:
    """A loopback port below the ephemeral range, claimed for this process's life and free now."""
    LOCKS.mkdir(exist_ok=True)
    high = max(LOWEST + 1000, _ephemeral_low())
    for _ in range(1000):
        port = random.randrange(LOWEST, high)
        if port in _held or not _claim(port):
            continue
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port in {LOWEST}-{high - 1} after 1000 tries")
