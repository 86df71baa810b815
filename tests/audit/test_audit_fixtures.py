"""Every committed fixture in tests/fixtures, audited with its recorded policy, gives the
verdict listed in tests/fixtures/expected.json (see tests/fixtures/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit_helpers import FIXTURES
from otel_loopguard.policy import BUILTIN_VERSION, load_policy

MANIFEST = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
CASES = MANIFEST["cases"]
NOT_FIXTURES = {"README.md", "expected.json", "make_fixtures.py"}


def _param(case: dict):
    marks = [pytest.mark.xfail(strict=True, reason=case["known_bug"])] if case.get("known_bug") else []
    return pytest.param(case, id=case["name"], marks=marks)


def _args(case: dict) -> tuple[list[Path], Path | None]:
    files = [FIXTURES / f for f in case["files"]]
    return files, (FIXTURES / case["policy"]) if case["policy"] else None


def test_every_fixture_file_is_in_the_manifest() -> None:
    on_disk = {
        p.relative_to(FIXTURES).as_posix()
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name not in NOT_FIXTURES and "policies" not in p.parts and "__pycache__" not in p.parts
    }
    listed = {f for case in CASES for f in case["files"]}
    assert on_disk == listed
    assert len({c["name"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_recorded_policy_version_is_the_one_in_the_manifest(case: dict) -> None:
    _, policy = _args(case)
    assert load_policy(policy).version == case["policy_version"]
    if policy is None:
        assert case["policy_version"] == BUILTIN_VERSION


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_fixture_verdict(audit_fast, case: dict) -> None:
    files, policy = _args(case)
    proc = audit_fast(*files, policy=policy, fmt="json")
    assert proc.returncode != 2, proc.stderr
    doc = json.loads(proc.stdout)
    runs = {r["run_id"]: r for r in doc["runs"]}
    assert set(runs) == set(case["runs"])
    for run_id, expected in case["runs"].items():
        run = runs[run_id]
        assert run["outcome"] == expected["outcome"], run_id
        release = run["score"]["release"]
        assert (None if release is None else release["passed"]) == expected["passed"], (run_id, release)
        assert [f"{f['kind']}:{f['severity']}" for f in run["findings"]] == expected["findings"], run_id
        for field, value in expected.get("score", {}).items():
            assert run["score"][field] == value, (run_id, field)
        broken = [v.split(":", 1)[0] for v in (release or {}).get("violations", [])]
        for violation in expected.get("violations", []):
            assert violation in broken, (run_id, broken)
        if expected["outcome"] != "scored":
            assert release is None  # unscorable runs are never scored clean
    assert proc.returncode == case["exit"]


def test_fixture_findings_carry_the_recorded_policy_version(monkeypatch) -> None:
    from otel_loopguard.audit import audit

    monkeypatch.setenv("OTEL_LOOPGUARD_KEY", "fixtures-key-0123456789abcdef")
    for case in CASES:
        files, policy = _args(case)
        for report in audit(files, policy):
            assert all(f.policy_version == case["policy_version"] for f in report.findings), case["name"]


def test_fixture_exit_status_from_a_real_subprocess(audit) -> None:
    case = next(c for c in CASES if c["name"] == "split_run")
    files, policy = _args(case)
    proc = audit(*files, policy=policy)
    assert proc.returncode == case["exit"], proc.stderr
    for run_id in case["runs"]:
        assert f"RUN {run_id}" in proc.stdout
