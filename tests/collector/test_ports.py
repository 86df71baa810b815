"""The Collector tests' ports (ports.py): never one another test process holds, never one the kernel
hands out on its own, never one in use."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from . import ports

TESTS = Path(__file__).resolve().parents[1]


def test_ports_are_below_the_ephemeral_range_and_distinct() -> None:
    got = [ports.reserved_port() for _ in range(20)]
    assert len(set(got)) == 20
    assert all(ports.LOWEST <= p < ports._ephemeral_low() for p in got), got


def test_two_processes_at_once_never_get_the_same_port() -> None:
    script = "import sys; sys.path.insert(0, sys.argv[1]); from collector.ports import reserved_port; " \
             "import time; got = [reserved_port() for _ in range(200)]; print(*got); sys.stdout.flush(); time.sleep(2)"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(TESTS)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    first, second = ({int(p) for p in proc.communicate(timeout=60)[0].split()} for proc in procs)
    assert len(first) == len(second) == 200
    assert not first & second


def test_a_port_claimed_elsewhere_or_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation check: the first two candidates are taken (one claimed by another process's
    flock, one listened on); the third is the answer."""
    claimed, listening, free = (ports.reserved_port() for _ in range(3))
    for p in (claimed, free):  # given back, as if never claimed by this process
        os.close(ports._held.pop(p))
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)",
                               str(ports.LOCKS / str(claimed))], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.close(ports._held.pop(listening))
        with socket.socket() as server:
            server.bind(("127.0.0.1", listening))
            server.listen()
            candidates = iter([claimed, listening, free])
            monkeypatch.setattr(ports.random, "randrange", lambda _a, _b: next(candidates))
            assert ports.reserved_port() == free
    finally:
        holder.kill()
        holder.wait()
