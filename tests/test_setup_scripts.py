"""The README's commands talk: a line per step with elapsed time, pip's own lines, never silent
for more than 10 s, and an up-to-date virtualenv reused instead of reinstalled.

Runs scripts/setup.sh into a fresh virtualenv in a temp dir (core dependencies only, from PyPI
or pip's cache: about 20 s), then scripts/demo.sh on it, timing every line of output.
scripts/test.sh runs the same setup.sh (its own steps are printed the same way).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_SILENCE = 10.0


def _timed(cmd: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, list[tuple[float, str]]]:
    """Exit status and (seconds since start, line) for every line, stdout and stderr together."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    lines = [(0.0, "(start)")]
    for line in proc.stdout:
        lines.append((time.monotonic() - t0, line.rstrip("\n")))
        assert time.monotonic() - t0 < timeout, lines[-5:]
    status = proc.wait(timeout)
    lines.append((time.monotonic() - t0, "(exit)"))
    return status, lines


def _longest_silence(lines: list[tuple[float, str]]) -> tuple[float, str]:
    return max((b[0] - a[0], a[1]) for a, b in zip(lines, lines[1:]))


def test_setup_and_demo_say_what_they_do_and_reuse_an_up_to_date_venv(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VIRTUAL_ENV"))}
    env["VENV"] = str(tmp_path / "venv")

    status, fresh = _timed(["bash", "scripts/setup.sh"], env)
    text = "\n".join(line for _, line in fresh)
    assert status == 0, text[-3000:]
    for step in ("creating the virtualenv", "installing otel-loopguard", "done:"):
        assert f"s] {step}" in text, (step, text[-2000:])
    # The installer's own progress is shown, not swallowed: uv's, or pip's where uv cannot be had.
    assert re.search(r"with uv \d", text) or "s] upgrading pip" in text, text[-2000:]
    assert re.search(r"^ +Installed \d+ packages", text, re.M) or "Successfully installed" in text, text[-2000:]
    gap, before = _longest_silence(fresh)
    assert gap <= MAX_SILENCE, f"silent for {gap:.1f} s after {before!r}"

    status, again = _timed(["bash", "scripts/setup.sh"], env)
    assert status == 0 and len(again) == 3, again  # one line: reused, nothing reinstalled
    assert "is up to date" in again[1][1] and "reused" in again[1][1] and again[-1][0] < 10

    status, demo = _timed(["bash", "scripts/demo.sh"], env)
    text = "\n".join(line for _, line in demo)
    assert status == 0, text[-3000:]
    assert "is up to date" in text and "s] running the demo" in text
    assert "support agent stuck on one order           stop     repeat" in text
    gap, before = _longest_silence(demo)
    assert gap <= MAX_SILENCE, f"silent for {gap:.1f} s after {before!r}"


def test_pip_installs_where_uv_cannot_be_had(tmp_path: Path) -> None:
    """The fallback: with LOOPGUARD_PIP=1 (as where uv cannot be installed) pip upgrades itself and
    installs, its own lines shown, and the virtualenv works; no uv is fetched."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VIRTUAL_ENV"))}
    env.update(VENV=str(tmp_path / "venv"), LOOPGUARD_PIP="1")
    status, lines = _timed(["bash", "scripts/setup.sh"], env)
    text = "\n".join(line for _, line in lines)
    assert status == 0, text[-3000:]
    assert "s] upgrading pip" in text and "with pip;" in text and "Successfully installed" in text, text[-2000:]
    assert "getting uv" not in text and "with uv" not in text, text[-2000:]
    assert not (tmp_path / "venv" / "bin" / "uv").exists()
    gap, before = _longest_silence(lines)
    assert gap <= MAX_SILENCE, f"silent for {gap:.1f} s after {before!r}"
    proc = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c", "import otel_loopguard"], timeout=60)
    assert proc.returncode == 0


def test_a_changed_dependency_list_is_not_taken_for_up_to_date(tmp_path: Path) -> None:
    """Negative control: the reuse is keyed on pyproject.toml and the extras, not on the folder."""
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (venv / ".otel-loopguard-setup").write_text("0000000000000000\n")  # made from another list
    env = {**os.environ, "VENV": str(venv), "PATH": os.environ.get("PATH", "")}
    proc = subprocess.run(["bash", "-c", "timeout 5 bash scripts/setup.sh test || true"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert "was made from another dependency list: updating it (extras: test)" in proc.stdout, proc.stdout


def test_a_long_test_is_named_while_it_runs_as_test_sh_runs_pytest(tmp_path: Path) -> None:
    """scripts/test.sh pipes `pytest -v` through scripts/talk.sh (a line every 8 s); here every 1 s."""
    import sys

    (tmp_path / "test_slow.py").write_text("import time\n\n\ndef test_slow():\n    time.sleep(3)\n")
    pytest_cmd = f"{sys.executable} -m pytest -v -p no:cacheprovider test_slow.py"
    script = f"cd {tmp_path} && {pytest_cmd} 2>&1 | TALK_EVERY=1 bash {ROOT / 'scripts' / 'talk.sh'} test running"
    status, lines = _timed(["bash", "-c", script], dict(os.environ))
    text = "\n".join(line for _, line in lines)
    assert status == 0, text
    assert "s] still running: test_slow.py::test_slow" in text, text
    assert "test_slow.py::test_slow PASSED" in text  # the partial line completed, not lost
    gap, before = _longest_silence(lines)
    assert gap <= 2.5, f"silent for {gap:.1f} s after {before!r}"
