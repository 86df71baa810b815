"""`duplicate_write`: a side-effecting call repeated without the same idempotency key."""

from __future__ import annotations

import pytest

from .helpers import NO_BUDGETS, Harness, brief, briefs, feed, spans

REFUND = "issue_refund"
POL = {
    "budget": NO_BUDGETS,
    "tools": {REFUND: {"idempotency_key": "idempotency_key", "identity_fields": ["tenant"]}},
}


def refund(key: object = None, amount: int = 25, order: str = "A12", result: object = None) -> dict:
    args: dict = {"order_id": order, "amount": amount}
    if key is not None:
        args["idempotency_key"] = key
    return {"tool": REFUND, "args": args, "result": result or {"status": "accepted"}}


def test_a_retry_with_the_same_key_is_safe() -> None:
    assert briefs(feed([refund("k-1"), refund("k-1"), refund("k-1")], POL), "duplicate_write") == []


def test_a_retry_with_a_different_key_may_pay_twice() -> None:
    h = Harness(POL)
    h.feed([refund("k-1"), refund("k-2", result={"status": "success"})])
    (dup,) = h.kind("duplicate_write")
    assert brief(dup) == ("duplicate_write", "stop", 1, 2, 2)
    assert dup.seqs == (1, 2) and dup.span_ids == spans(1, 2)
    assert dup.tool == REFUND and dup.action == h.calls[1].action
    assert "a different idempotency key (first at call 1)" in dup.reason


def test_a_retry_without_any_key_may_pay_twice() -> None:
    h = Harness(POL)
    h.feed([refund(), refund()])
    (dup,) = h.kind("duplicate_write")
    assert brief(dup) == ("duplicate_write", "stop", 1, 2, 2)
    assert "no idempotency key" in dup.reason


@pytest.mark.parametrize("keys", [("k-1", None), (None, "k-1")])
def test_a_key_on_only_one_of_the_two_is_a_duplicate(keys: tuple) -> None:
    h = Harness(POL)
    h.feed([refund(keys[0]), refund(keys[1])])
    assert briefs(h.findings, "duplicate_write") == [("duplicate_write", "stop", 1, 2, 2)]
    assert "no idempotency key (first at call 1)" in h.kind("duplicate_write")[0].reason  # not "a different" one


def test_a_later_new_key_is_compared_with_the_first_write() -> None:
    h = Harness(POL)
    h.feed([refund("k-1"), refund("k-1"), refund("k-3")])
    assert briefs(h.findings, "duplicate_write") == [("duplicate_write", "stop", 1, 3, 2)]
    assert h.kind("duplicate_write")[0].seqs == (1, 3)


def test_different_writes_are_not_duplicates() -> None:
    steps = [refund("k-1", amount=25), refund("k-2", amount=30), refund("k-3", order="B7")]
    assert feed(steps, POL) == []


def test_the_key_is_left_out_of_the_write_but_not_of_the_action() -> None:
    h = Harness(POL)
    h.feed([refund("k-1"), refund("k-2")])
    a, b = h.calls
    assert a.write == b.write and a.write_key != b.write_key
    assert a.action != b.action


def test_a_read_tool_repeated_is_not_a_duplicate_write() -> None:
    steps = [{"tool": "get_refund", "args": {"order_id": "A12"}, "result": "none"}] * 2
    assert briefs(feed(steps, POL), "duplicate_write") == []


def test_side_effect_without_a_key_rule() -> None:
    pol = {"budget": NO_BUDGETS, "tools": {"send_email": {"side_effect": True}}}
    steps = [{"tool": "send_email", "args": {"to": "a@example.com", "body": "hi"}, "result": "sent"}] * 2
    assert briefs(feed(steps, pol), "duplicate_write") == [("duplicate_write", "stop", 1, 2, 2)]


def test_identity_fields_keep_the_actions_of_two_tenants_apart() -> None:
    h = Harness(POL)
    for tenant in ("acme", "globex", "acme", "globex", "acme", "globex"):
        h.call("list_records", {"page": 1}, {"rows": [1]}, identity={"tenant": tenant})
    # list_records declares no identity field: identity is ignored, the six calls are one action.
    assert len({c.action for c in h.calls}) == 1
    pol = {"budget": NO_BUDGETS, "tools": {"list_records": {"identity_fields": ["tenant"]}}}
    h = Harness(pol)
    for tenant in ("acme", "globex", "acme", "globex"):
        h.call("list_records", {"page": 1}, {"rows": [tenant]}, identity={"tenant": tenant})
    assert h.calls[0].action == h.calls[2].action != h.calls[1].action
    assert h.kind("repeat") == []


def test_the_same_write_for_two_tenants_is_not_a_duplicate() -> None:
    h = Harness(POL)
    h.call(REFUND, {"order_id": "A12", "amount": 25}, {"status": "accepted"}, identity={"tenant": "acme"})
    h.call(REFUND, {"order_id": "A12", "amount": 25}, {"status": "accepted"}, identity={"tenant": "globex"})
    assert h.calls[0].action != h.calls[1].action
    assert h.kind("duplicate_write") == []


def test_the_same_write_for_one_tenant_is_a_duplicate() -> None:
    # Positive control for the test above.
    h = Harness(POL)
    for _ in range(2):
        h.call(REFUND, {"order_id": "A12", "amount": 25}, {"status": "accepted"}, identity={"tenant": "acme"})
    assert briefs(h.findings, "duplicate_write") == [("duplicate_write", "stop", 1, 2, 2)]


def test_redacted_spans_of_different_writes_are_not_duplicates() -> None:
    """Spans tagged by the processor carry digests, not arguments: two different
    refunds must not share a write identity."""
    from otel_loopguard.calls import RawCall
    from otel_loopguard.detect import Run
    from otel_loopguard.canon import load_key
    from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call
    from otel_loopguard.policy import policy_from_mapping

    policy = policy_from_mapping({"tools": {"issue_refund": {"idempotency_key": "key"}}})
    fp = Fingerprinter(load_key(key=b"k" * 32), policy)
    run = Run("r", policy)
    found = []
    for seq, digest in ((1, "a" * 32), (2, "b" * 32)):
        raw = RawCall(seq=seq, tool="issue_refund", args_digest=digest, result_digest="c" * 32)
        found += run.observe(fingerprint_call(raw, fp))
    assert [f.kind for f in found if f.kind == "duplicate_write"] == []
    raw = RawCall(seq=3, tool="issue_refund", args_digest="a" * 32, result_digest="c" * 32)
    assert [f.kind for f in run.observe(fingerprint_call(raw, fp))] == ["duplicate_write"]


# ---- preview: the second write is stopped before it runs ----------------------------------------


def write_previews(h: Harness, step: dict) -> list[tuple[str, str]]:
    call = h.fingerprint(step["tool"], step["args"], None)
    return [(lvl, reason) for lvl, kind, reason in h.run.preview(call) if kind == "duplicate_write"]


def test_preview_stops_a_second_write_that_does_not_reuse_the_key() -> None:
    h = Harness(POL)
    assert write_previews(h, refund("k-1")) == []  # nothing written yet
    h.feed([refund("k-1")])
    assert write_previews(h, refund("k-1")) == []  # a retry with the same key is safe
    expected = [("stop", f"{REFUND} already ran with the same arguments (call 1) and this call does not "
                         "reuse its idempotency key: running it may repeat the side effect")]
    assert write_previews(h, refund("k-2")) == expected
    assert write_previews(h, refund()) == expected
    assert write_previews(h, refund("k-1", amount=30)) == []  # other arguments: another write


def test_preview_of_a_tool_without_side_effects_is_silent() -> None:
    h = Harness(POL)
    read = {"tool": "read_order", "args": {"order_id": "A12"}, "result": "ok"}
    h.feed([read])
    assert write_previews(h, read) == []
