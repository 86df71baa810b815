"""RawCall -> ToolCall: the one place where shells' input becomes detector input."""

from __future__ import annotations

from ..calls import RawCall, ToolCall
from ..progress import extract
from .canonical import NO_FLAGS
from .fingerprinter import Fingerprinter


def fingerprint_call(raw: RawCall, fp: Fingerprinter) -> ToolCall:
    """Digest arguments and result (unless precomputed) and extract progress evidence."""
    rule = fp.policy.rule(raw.tool)
    args_value = None
    flags: frozenset[str] = NO_FLAGS
    action = raw.args_digest
    if action is None or rule.progress or rule.side_effect:
        a = fp.action(raw.tool, raw.arguments, raw.identity)
        action, args_value, flags = action or a.digest, a.value, a.flags
    result_digest = raw.result_digest
    result_value = None
    if raw.finished and (result_digest is None or rule.progress):
        r = fp.result(raw.tool, raw.result)
        result_digest, result_value = result_digest or r.digest, r.value
        if r.flags:
            flags = flags | {f"result:{f}" for f in r.flags}
    write = write_key = None
    if rule.side_effect and raw.arguments is not None:
        write, write_key = fp.write(raw.tool, args_value, raw.identity)
    elif rule.side_effect:
        # Redacted span: no arguments, so no idempotency key to read. The action
        # digest still tells the same write from a different one.
        write = action
    return ToolCall(
        seq=raw.seq,
        tool=raw.tool,
        action=action,
        result=result_digest if raw.finished else None,
        ok=raw.ok if raw.finished else None,
        turn=raw.turn,
        call_id=raw.call_id,
        span_id=raw.span_id,
        start_ns=raw.start_ns,
        end_ns=raw.end_ns,
        trace_id=raw.trace_id,
        parent_id=raw.parent_id,
        evidence=extract(rule.progress, args_value, result_value),
        write=write,
        write_key=write_key,
        flags=flags,
    )
