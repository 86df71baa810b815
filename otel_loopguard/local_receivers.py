"""Receivers running on this machine, so that `install()` can tell an app it bypasses one.

The obvious setup (`serve --forward 127.0.0.1:4317`, and an app whose exporter keeps its
default of localhost:4317) sends the app's spans straight to the backend, around the receiver,
and nothing says so. Only the receiver knows where it forwards, so each running receiver leaves
a small note: `<dir>/<pid>-<port>.json` with its listen and forward addresses (no headers, no keys),
removed when it stops. `install()` reads the notes of live processes and warns once when its
exporter targets an address a local receiver forwards to.

<dir> is $OTEL_LOOPGUARD_RUNTIME_DIR, else $XDG_RUNTIME_DIR/otel-loopguard, else
~/.cache/otel-loopguard/run: per user, so another user's receiver is not seen (nor one in
another container or on another host: there the app cannot know, docs/processor.md).
Standard library only; every failure here is ignored (a note is a courtesy, never a reason
for a receiver or an app not to start).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", ""})


def notes_dir() -> Path:
    explicit = os.environ.get("OTEL_LOOPGUARD_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "otel-loopguard" if runtime else Path.home() / ".cache" / "otel-loopguard" / "run"


def announce(listen: str, forward: Optional[str]) -> Optional[Path]:
    """Leave this process's note; the path to remove at shutdown, or None if it could not be written."""
    try:
        folder = notes_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        port = listen.rpartition(":")[2]
        path = folder / f"{os.getpid()}-{port}.json"  # several receivers may share a process
        path.write_text(json.dumps({"pid": os.getpid(), "listen": listen, "forward": forward}), encoding="utf-8")
        return path
    except OSError:
        return None


def withdraw(path: Optional[Path]) -> None:
    if path is not None:
        try:
            path.unlink()
        except OSError:
            pass


def running() -> list[dict[str, object]]:
    """The notes of receivers whose process is still alive (stale notes are skipped)."""
    out: list[dict[str, object]] = []
    try:
        paths = sorted(notes_dir().glob("*.json"))
    except OSError:
        return out
    for path in paths:
        try:
            note = json.loads(path.read_text(encoding="utf-8"))
            pid = int(note["pid"])
            if pid != os.getpid():  # this process (a receiver embedded in it) is alive, surely
                os.kill(pid, 0)  # raises when the process is gone
            out.append(note)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # gone, unreadable, or another user's process
    return out


def host_port(address: str) -> Optional[tuple[str, int]]:
    """"http://localhost:4317", "127.0.0.1:4317", "[::1]:4317" -> (host, port); None if no port."""
    text = address.split("://", 1)[-1].split("/", 1)[0]
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        return None
    return host.removeprefix("[").removesuffix("]").lower(), int(port)


def same_local_address(a: str, b: str) -> bool:
    """Both name the same port on this machine (localhost, 127.0.0.1, ::1 and the wildcard alike)."""
    pa, pb = host_port(a), host_port(b)
    if pa is None or pb is None or pa[1] != pb[1]:
        return False
    return pa[0] == pb[0] or (pa[0] in _LOCAL_HOSTS and pb[0] in _LOCAL_HOSTS)
