"""Instruction counts under valgrind's callgrind, for the benches' `--callgrind` modes: this
machine's speed drifts, its instruction counts do not."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Optional, Sequence


def instructions(code: str, *, options: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
                 thread: Optional[int] = None) -> int:
    """The instructions `python -c code` runs under callgrind with `options`; `thread`: only that
    thread's (1: the main thread). Run in an empty folder: `python -c` puts the working folder
    first on sys.path, which must not be a checkout."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        threads = ["--separate-threads=yes"] if thread is not None else []
        subprocess.run(["valgrind", "--tool=callgrind", *options, *threads, f"--callgrind-out-file={out}",
                        sys.executable, "-c", code], check=True, capture_output=True, env={**os.environ, **(env or {})},
                       cwd=tmp)
        counted = Path(f"{out}-{thread:02d}") if thread is not None else out
        totals = [ln for ln in counted.read_text().splitlines() if ln.startswith(("summary:", "totals:"))]
        return int(totals[-1].split()[1])
