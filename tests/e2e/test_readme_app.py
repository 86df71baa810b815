"""The README's "Use it in your app", followed as written in a fresh project directory.

Step by step, from the README's own text: `pip install <this checkout>` into the project's new
virtualenv, the example `app.py` verbatim, the receiver command and the app command as the
README writes them. Only what a shared test machine needs is changed: port numbers (free
ones instead of 4327/4317/6006) and `phoenix serve`, which the Phoenix fixture runs on loopback.
The virtualenv sees the test virtualenv's packages through a .pth file, so pip builds and
installs this package but downloads none of its dependencies.

Done when Phoenix, read through its REST API, holds the app's trace with the stop finding
(status ERROR, kind GUARDRAIL, the descriptive name) and the `loopguard` trace annotation.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Iterator

import pytest

from live import child_env, free_port, stop, tail

from .phoenix_server import Phoenix, phoenix_installed, running_phoenix

pytestmark = pytest.mark.skipif(not phoenix_installed(), reason="arize-phoenix is not installed (the `phoenix` extra)")

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## Use it in your app", 1)[1].split("\n## ", 1)[0]


def _blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[Phoenix]:
    with running_phoenix(tmp_path) as server:
        yield server


def test_the_readme_instructions_put_findings_in_phoenix(phoenix: Phoenix, tmp_path: Path) -> None:
    install, app, commands = (_blocks(_section(), "bash")[0], _blocks(_section(), "python")[0],
                              _blocks(_section(), "bash")[1])
    project = tmp_path / "my-project"
    project.mkdir()
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # the dependencies, not this package
    env = child_env(lambda k: k.startswith(("OTEL_", "VIRTUAL_ENV")))
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    # 1. Install: the README's first line, with the checkout's path.
    line = install.splitlines()[0].split("#", 1)[0].replace("/path/to/otel-loopguard", shlex.quote(str(ROOT)))
    pip = subprocess.run(["bash", "-c", line], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    where = subprocess.run(["python", "-c", "import otel_loopguard; print(otel_loopguard.__file__)"], cwd=project,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(venv)), where  # the project's own copy, not the checkout's sources

    # 2. The example app, verbatim.
    (project / "app.py").write_text(app, encoding="utf-8")

    # 3. The key, the receiver and the app, as written; free ports for 4327, 4317 and 6006.
    listen = free_port()
    ports = {"4327": str(listen), "4317": str(phoenix.grpc_port), "6006": str(phoenix.http_port)}
    lines = [ln for ln in commands.splitlines() if ln.strip() and not ln.startswith("phoenix serve")]
    key_line, serve_line, app_line = lines
    key = subprocess.run(["bash", "-c", key_line + '\nprintf %s "$OTEL_LOOPGUARD_KEY"'], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert len(key) == 64
    env["OTEL_LOOPGUARD_KEY"] = key
    serve = re.sub(r"\b(4327|4317|6006)\b", lambda m: ports[m.group(1)], serve_line.rstrip(" &"))
    phoenix.wait_healthy(60)
    err_path = tmp_path / "receiver.err"
    with err_path.open("w") as err:
        receiver = subprocess.Popen(shlex.split(serve), cwd=project, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait_listening(receiver, listen, err_path)
        run_app = re.sub(r"\b4327\b", str(listen), app_line)
        ran = subprocess.run(["bash", "-c", run_app], cwd=project, env=env, capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "go around the receiver" not in ran.stderr  # the app's spans went through it

        # 4. Phoenix holds the app's trace with the stop finding and the annotation.
        trace_id = _stop_run(err_path)
        deadline = time.monotonic() + 45
        while True:
            spans = phoenix.spans("default", trace_id)
            stops = [s for s in spans if s["attributes"].get("loopguard.finding.severity") == "stop"
                     and s["attributes"].get("loopguard.finding.kind") == "repeat"]
            notes = phoenix.trace_annotations("default", [trace_id])
            if stops and notes and any(s["name"].startswith("loopguard.run") for s in spans):
                break
            assert time.monotonic() < deadline, f"{sorted(s['name'] for s in spans)} {notes}\n{tail(err_path)}"
            time.sleep(0.5)
    finally:
        stop(receiver)
    (finding,) = stops
    assert finding["name"] == "loopguard.finding stop repeat lookup_order"
    assert finding["status_code"] == "ERROR" and finding["span_kind"] == "GUARDRAIL"
    assert finding["status_message"] == finding["attributes"]["loopguard.finding.reason"]
    tools = [s for s in spans if s["name"] == "execute_tool lookup_order"]
    assert len(tools) == 6 and all(s["attributes"]["loopguard.args.digest"] for s in tools)
    assert [n["result"]["label"] for n in notes if n["name"] == "loopguard"] == ["stop: repeat lookup_order x5"]
    assert key not in err_path.read_text() and key not in ran.stdout + ran.stderr


def _wait_listening(proc: subprocess.Popen, port: int, err: Path) -> None:
    import socket

    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, f"the receiver exited with {proc.returncode}:\n{tail(err)}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            assert time.monotonic() < deadline, f"the receiver never listened:\n{tail(err)}"
            time.sleep(0.2)


def _stop_run(err: Path) -> str:
    """The run (the trace id, by default) of the first repeat/stop the receiver logged."""
    deadline = time.monotonic() + 30
    while True:
        found = re.search(r"finding repeat/stop tool=lookup_order run=([0-9a-f]{32})", err.read_text())
        if found:
            return found.group(1)
        assert time.monotonic() < deadline, f"no stop finding logged:\n{tail(err)}"
        time.sleep(0.2)
