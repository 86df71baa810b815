"""Helpers for the scoring tests: RawCall builders and NDJSON runs audited in process."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Optional
from unittest import mock

from otel_loopguard.audit import audit
from otel_loopguard.calls import RawCall
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import Policy, load_policy
from otel_loopguard.score import RunReport

KEY = "score-tests-key-0123456789abcdef"
SEED_POLICY = Path(__file__).resolve().parent.parent / "fixtures" / "policies" / "seed-v1.yaml"

A12 = {"order_id": "A12", "include_items": True}
DELIVERED = {"status": "delivered", "version": 7}
NOT_RUN = {"ok": False, "dispatched": False, "guard": "repeat"}


def fingerprinter(policy: Optional[Policy] = None) -> Fingerprinter:
    return Fingerprinter(load_key(key=KEY), policy or load_policy(SEED_POLICY))


def raw(seq: int, tool: str = "lookup_order", arguments: Any = None, result: Any = None, **kw: Any) -> RawCall:
    kw.setdefault("call_id", f"c{seq}")
    kw.setdefault("turn", seq)
    return RawCall(
        seq=seq,
        tool=tool,
        arguments=A12 if arguments is None else arguments,
        result=DELIVERED if result is None else result,
        **kw,
    )


def call(seq: int, tool: str = "lookup_order", arguments: Any = None, observation: Any = None, run: str = "r", **kw: Any) -> dict:
    """An NDJSON tool-call record (docs/audit.md)."""
    return {
        "run_id": run,
        "sequence": seq,
        "call_id": f"{run}-{seq}",
        "turn": seq,
        "tool": tool,
        "arguments": A12 if arguments is None else arguments,
        "observation": DELIVERED if observation is None else observation,
        **kw,
    }


def run_record(reason: Optional[str] = None, terminal: Optional[bool] = None, run: str = "r") -> dict:
    rec: dict[str, Any] = {"record": "run", "run_id": run}
    if reason is not None:
        rec["termination_reason"] = reason
    if terminal is not None:
        rec["terminal_response"] = terminal
    return rec


def lookups(n: int, run: str = "r") -> list[dict]:
    return [call(i, run=run) for i in range(1, n + 1)]


def audit_records(tmp_path: Path, records: Iterable[dict], policy: Optional[Path | dict] = SEED_POLICY) -> list[RunReport]:
    """Write NDJSON records to a file and audit it in process (the CLI's `audit`)."""
    path = tmp_path / f"run-{len(list(tmp_path.iterdir()))}.ndjson"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    if isinstance(policy, dict):
        policy_path = path.with_suffix(".policy.json")
        policy_path.write_text(json.dumps(policy), encoding="utf-8")
        policy = policy_path
    with mock.patch.dict(os.environ, {"OTEL_LOOPGUARD_KEY": KEY}):
        return audit([path], policy)


def one(tmp_path: Path, records: Iterable[dict], policy: Optional[Path | dict] = SEED_POLICY) -> RunReport:
    reports = audit_records(tmp_path, records, policy)
    assert len(reports) == 1, reports
    return reports[0]


def kinds(report: RunReport) -> list[tuple[str, str]]:
    return [(f.kind, f.severity) for f in report.findings]


def violations(report: RunReport) -> list[str]:
    release = report.score["release"]
    return [v.split(":", 1)[0] for v in release["violations"]] if release else []
