"""Newline-delimited JSON-RPC over stdio: bytes in, whole lines out, each line's bytes kept.

A line is forwarded exactly as read (its newline included). Only a line of at most
`max_line` bytes is parsed; a longer one is still forwarded whole, in the pieces it arrived
in, without being looked at (memory stays bounded by `max_line` plus one read).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_LINE = 16 * 1024 * 1024


@dataclass(frozen=True)
class Piece:
    data: bytes
    whole: bool  # a complete line of at most max_line bytes: parse it


class LineSplitter:
    """Cuts a byte stream at newlines; `feed` returns the pieces ready to forward."""

    def __init__(self, max_line: int = MAX_LINE):
        self._max = max_line
        self._buf = bytearray()
        self._passing = False  # inside a line too long to parse: forward as it comes

    def feed(self, data: bytes) -> list[Piece]:
        self._buf += data
        out: list[Piece] = []
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                break
            line = bytes(self._buf[: end + 1])
            del self._buf[: end + 1]
            out.append(Piece(line, whole=not self._passing))
            self._passing = False
        if len(self._buf) > self._max:
            out.append(Piece(bytes(self._buf), whole=False))
            self._buf.clear()
            self._passing = True
        return out

    def rest(self) -> list[Piece]:
        """What is left at end of stream: a last line without its newline."""
        if not self._buf:
            return []
        piece = Piece(bytes(self._buf), whole=not self._passing)
        self._buf.clear()
        return [piece]


def parse(line: bytes) -> Any:
    """The JSON value of a line, or None when it is not JSON (blank lines included)."""
    text = line.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
