"""The guard on the reported loop (same arguments, payload differing only in a fresh message id
and a fetch time): denied before it runs by call 8; legitimate work with such values is not."""

from __future__ import annotations

import itertools
import uuid
from typing import Any, Callable

import pytest

from otel_loopguard.enforce import Guard
from otel_loopguard.canon import load_key
from otel_loopguard.fingerprint import Fingerprinter
from otel_loopguard.policy import load_policy, policy_from_mapping

KEY = load_key(key=b"g" * 32)


def drive(tool: Callable[[int], Any], args: Callable[[int], dict], policy: Any = None, n: int = 12) -> tuple[list, list]:
    """Up to n calls of one tool; (indexes denied, decisions other than allow)."""
    guard = Guard(Fingerprinter(KEY, policy or policy_from_mapping({})))
    denied, noted = [], []
    for i in range(1, n + 1):
        d = guard.check("read_messages", args(i), run_id="r", turn=i)
        if d.action != "allow":
            noted.append((i, d.action, d.kind))
        if d.denied:
            denied.append(i)
            continue
        guard.record(d, tool(i), True, run_id="r")
    return denied, noted


def reader(i: int) -> dict:
    return {"messages": [], "messageId": str(uuid.uuid4()), "fetchedAt": f"2026-12-02T01:00:{i:02d}.000Z"}


SAME = lambda i: {"channel": "ops"}  # noqa: E731


@pytest.mark.parametrize("policy", [None, "seed-001"])
def test_the_reported_reader_loop_is_denied_by_call_8(policy: Any) -> None:
    denied, _ = drive(reader, SAME, load_policy(policy) if policy else None)
    assert denied and denied[0] <= 8


def test_control_without_masking_the_loop_is_invisible() -> None:
    denied, noted = drive(reader, SAME, policy_from_mapping({"volatile_values": False}))
    assert denied == [] and noted == []


def test_a_reader_that_receives_new_messages_is_never_warned() -> None:
    counter = itertools.count()
    denied, noted = drive(lambda i: {"messages": [{"text": f"m{next(counter)}"}], "messageId": str(uuid.uuid4()),
                                     "fetchedAt": f"2026-12-02T01:00:{i:02d}Z"}, SAME)
    assert (denied, noted) == ([], [])


def test_paging_with_cursors_and_uuid_items_is_never_warned() -> None:
    denied, noted = drive(lambda i: {"items": [{"id": str(uuid.uuid4())}], "next": f"Y3Vyc29yOnBhZ2U6{i:04d}QUJD"},
                          lambda i: {"channel": "ops", "cursor": None if i == 1 else f"Y3Vyc29yOnBhZ2U6{i - 1:04d}QUJD"})
    assert (denied, noted) == ([], [])


def test_a_create_tool_whose_id_is_declared_meaningful_is_never_warned() -> None:
    policy = policy_from_mapping({"tools": {"read_messages": {"meaningful_fields": ["messageId"]}}})
    denied, noted = drive(reader, SAME, policy)
    assert (denied, noted) == ([], [])
