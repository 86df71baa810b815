"""docs/ci.md, run: the GitHub Actions workflow's and the GitLab job's shell steps, as written there.

A repository is laid out as the page describes (its requirements file and policy taken from the
page, the traces the bundled examples of otel_loopguard/examples/), otel-loopguard is installed
by the job's own install step into a fresh virtualenv (from a wheel of this checkout and its
dependencies' wheels, with no index: the pinned name and version of the page resolve to this
code), and the audit step runs as the CI system would run it (`bash -eo pipefail`). The job
must fail on the looping example, with a JUnit report naming the failing run, and pass without
it. The cache keys are checked to name the file the job installs from (docs/ci.md says why).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from junitparser import Failure, JUnitXml

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ci.md"
EXAMPLES = ROOT / "otel_loopguard" / "examples"
WORKFLOW, GITLAB = ".github/workflows/loopguard-audit.yml", ".gitlab-ci.yml"
REPORT = "loopguard-junit.xml"
LOOPING_RUN = "support-order-A12"  # otel_loopguard/examples/looping_agent.ndjson


def _files() -> dict[str, str]:
    """The page's code blocks that are files: those whose first line is `# <path>`."""
    text = DOC.read_text(encoding="utf-8")
    out = {}
    for body in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        first = body.split("\n", 1)[0]
        if first.startswith("# ") and ("/" in first or first.startswith("# .")):
            out[first[2:].strip()] = body
    return out


FILES = _files()


def _github_steps() -> list[dict[str, Any]]:
    (job,) = yaml.safe_load(FILES[WORKFLOW])["jobs"].values()
    return job["steps"]


def _gitlab_job() -> dict[str, Any]:
    (job,) = yaml.safe_load(FILES[GITLAB]).values()
    return job


def _installed_from(commands: list[str]) -> str:
    (path,) = [m.group(1) for c in commands for m in [re.search(r"pip install -r (\S+)", c)] if m]
    return path


def test_the_page_has_every_file_the_jobs_use() -> None:
    assert set(FILES) == {"ci/loopguard-requirements.txt", "loopguard/policy.yaml", WORKFLOW, GITLAB}
    assert re.fullmatch(r"otel-loopguard==\d+\.\d+\.\d+", FILES["ci/loopguard-requirements.txt"].split("\n")[1])
    assert yaml.safe_load(FILES["loopguard/policy.yaml"])["version"]  # a versioned policy


def test_each_cache_is_keyed_on_the_file_its_job_installs_from() -> None:
    """Seed 000's pitfall: setup-python's pip cache without cache-dependency-path looks for
    requirements.txt or pyproject.toml, which such a repository lacks, and the job dies."""
    steps = _github_steps()
    (setup,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/setup-python")]
    installed = _installed_from([s["run"] for s in steps if "run" in s])
    assert setup["with"]["cache"] == "pip"
    assert setup["with"]["cache-dependency-path"] == installed in FILES
    job = _gitlab_job()
    assert job["cache"]["key"]["files"] == [_installed_from(job["script"])] == [installed]
    assert job["artifacts"]["reports"]["junit"] == REPORT and job["artifacts"]["when"] == "always"


def test_both_jobs_run_the_same_audit() -> None:
    github = [s["run"] for s in _github_steps() if "run" in s]
    assert github == _gitlab_job()["script"]
    assert any(f"--junit {REPORT}" in c and "--policy loopguard/policy.yaml" in c for c in github)
    publish = [s for s in _github_steps() if "report_paths" in s.get("with", {})]
    assert publish and publish[0]["with"]["report_paths"] == REPORT and "cancelled" in publish[0]["if"]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel of this checkout and of its dependencies (pip's cache makes this quick after setup)."""
    out = tmp_path_factory.mktemp("wheelhouse")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(out.glob("otel_loopguard-*.whl"))
    return out


@pytest.fixture(scope="module")
def ci_env(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> dict[str, str]:
    """What the job's `python` is: a fresh virtualenv, first on PATH; pip finds the wheelhouse only."""
    venv = tmp_path_factory.mktemp("ci") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_LOOPGUARD_", "PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(wheelhouse), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[Path]:
    """A repository as docs/ci.md lays it out, the bundled examples as its recorded traces."""
    for name in ("ci/loopguard-requirements.txt", "loopguard/policy.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(FILES[name], encoding="utf-8")
    shutil.copytree(EXAMPLES, tmp_path / "traces", ignore=shutil.ignore_patterns("__*"))
    yield tmp_path


def _run(commands: list[str], cwd: Path, env: dict[str, str]) -> list[subprocess.CompletedProcess]:
    """Each step as GitHub's default shell runs it (bash -eo pipefail); stop at the first failing one."""
    out = []
    for command in commands:
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600)
        out.append(proc)
        if proc.returncode != 0:
            break
    return out


def _check_gate(commands: list[str], repository: Path, env: dict[str, str]) -> None:
    install, audit = _run(commands, repository, env)
    assert install.returncode == 0, install.stderr[-3000:]
    assert audit.returncode == 1, audit.stdout + audit.stderr  # the looping example breaks the rule
    assert f"release rule: FAILS for {LOOPING_RUN}" in audit.stdout  # the log keeps the text report
    report = JUnitXml.fromfile(str(repository / REPORT))
    assert sorted(s.name for s in report) == sorted(f"traces/{p.name}" for p in EXAMPLES.glob("*.ndjson"))
    verdicts = {case.name: [type(r).__name__ for r in case.result] for suite in report for case in suite}
    assert verdicts.pop(LOOPING_RUN) == ["Failure"] and verdicts and all(v == [] for v in verdicts.values())
    (failure,) = [r for s in report for c in s for r in c.result if isinstance(r, Failure)]
    assert "uncontained_loop" in failure.message and "repeat/stop" in failure.message

    # Negative control: without the looping trace the same steps pass, and the report says so.
    (repository / "traces" / "looping_agent.ndjson").unlink()
    (repository / REPORT).unlink()
    results = _run(commands, repository, env)
    assert [p.returncode for p in results] == [0, 0], results[-1].stdout + results[-1].stderr
    report = JUnitXml.fromfile(str(repository / REPORT))
    assert (report.tests, report.failures) == (2, 0)


def test_the_github_workflow_steps_gate_on_the_examples(repository: Path, ci_env: dict[str, str]) -> None:
    _check_gate([s["run"] for s in _github_steps() if "run" in s], repository, ci_env)


def test_the_gitlab_job_script_gates_on_the_examples(repository: Path, ci_env: dict[str, str]) -> None:
    _check_gate(list(_gitlab_job()["script"]), repository, ci_env)
