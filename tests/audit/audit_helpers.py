"""Helpers for the audit tests: run the real `otel-loopguard audit` CLI as a subprocess."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Iterable, Optional
from unittest import mock

KEY = "audit-tests-key-0123456789abcdef"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEED_POLICY = FIXTURES / "policies" / "seed-v1.yaml"


# One call line of the text report: sequence, call id, tool, 16-hex digest prefix, outcome.
CALL_LINE = re.compile(r"^\s+(\d{6})\s+(\S+)\s+(\S+)\s+([0-9a-f]{16})\s+(ok|error|unknown)\s*$")


class Audit:
    """`otel-loopguard audit ...` with a fixed digest key.

    By default a real subprocess (`python -m otel_loopguard.cli`). With
    `in_process=True` the same entry point (`otel_loopguard.cli.main`) runs in
    this process with the same environment; the many parametrized bad-input
    variants use it to keep the folder fast, each category also has a
    subprocess test.
    """

    def __init__(self, cwd: Path, in_process: bool = False):
        self.cwd = cwd
        self.in_process = in_process
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_LOOPGUARD_")}
        self.env["OTEL_LOOPGUARD_KEY"] = KEY

    def __call__(self, *args: Any, policy: Optional[Path] = None, fmt: Optional[str] = None) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "otel_loopguard.cli", "audit", *map(str, args)]
        if fmt:
            cmd += ["--format", fmt]
        if policy:
            cmd += ["--policy", str(policy)]
        if self.in_process:
            return self._in_process(cmd)
        return subprocess.run(cmd, capture_output=True, text=True, env=self.env, cwd=self.cwd, timeout=60)

    def _in_process(self, cmd: list[str]) -> subprocess.CompletedProcess:
        from otel_loopguard import cli

        out, err = io.StringIO(), io.StringIO()
        with mock.patch.dict(os.environ, self.env, clear=True), redirect_stdout(out), redirect_stderr(err):
            try:
                code = cli.main(cmd[3:])
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
        return subprocess.CompletedProcess(cmd, code, out.getvalue(), err.getvalue())

    def json(self, *args: Any, policy: Optional[Path] = None) -> tuple[int, dict]:
        proc = self(*args, policy=policy, fmt="json")
        assert proc.returncode != 2, proc.stderr
        return proc.returncode, json.loads(proc.stdout)


def write_ndjson(path: Path, records: Iterable[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def findings_of(run: dict) -> list[tuple]:
    """The comparable part of a run's findings (reason text left out)."""
    return [(f["kind"], f["severity"], f["first_seq"], f["last_seq"], f["count"], f["tool"]) for f in run["findings"]]


def only_run(doc: dict) -> dict:
    assert len(doc["runs"]) == 1, doc
    return doc["runs"][0]
