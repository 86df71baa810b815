"""RawCall -> ToolCall: the one place where shells' input becomes detector input."""

from __future__ import annotations

from ..calls import NO_EQUIVALENCE, RawCall, ToolCall
from ..canon.canonical import NO_FLAGS
from ..progress import extract
from ..progress.evidence import NO_EVIDENCE
from .fingerprinter import Fingerprinter


def fingerprint_call(raw: RawCall, fp: Fingerprinter) -> ToolCall:
    """Digest arguments and result (unless precomputed) and extract progress evidence: every
    shell (processor, receiver, guard, audit) hands its call over as a RawCall."""
    tool, arguments, identity, finished = raw.tool, raw.arguments, raw.identity, raw.finished
    result_digest, result_exact = raw.result_digest, raw.result_exact_digest
    rule = fp.policy.rule(tool)
    args_value = None
    flags: frozenset[str] = NO_FLAGS
    action = raw.args_digest
    if rule.progress or rule.side_effect:  # the parsed value is needed: evidence, write key
        digest, flags, args_value = fp.action_parts(tool, rule, arguments, identity)
        action = action or digest
    elif action is None:
        action, flags = fp.action_digest(tool, rule, arguments, identity)
    result_value = None
    if finished and (result_digest is None or rule.progress):
        if rule.progress:
            digest, result_flags, result_value, exact = fp.result_full(tool, rule, raw.result)
        else:
            digest, result_flags, exact = fp.result_digests(tool, rule, raw.result)
        if result_digest is None:  # else both digests came with the call (a tagged span)
            result_digest, result_exact = digest, exact
        if result_flags:
            flags = flags | {f"result:{f}" for f in result_flags}
    eq = raw.equivalence
    if eq is None:
        # An unfinished call (the guard's preview, before dispatch) needs none: a preview
        # counts exact actions only, and its result is not known yet.
        eq = fp.equivalence(rule, arguments, args_value, raw.result, finished, identity) if finished and (
            arguments is not None or raw.result is not None) else NO_EQUIVALENCE
    ok = raw.ok if finished else None
    if eq.failed is not None and finished:
        ok = False  # the result says it failed (exit code, error field), whatever the span's status
    write = write_key = None
    if rule.side_effect and arguments is not None:
        write, write_key = fp.write(tool, args_value, identity)
    elif rule.side_effect:
        # Redacted span: no arguments, so no idempotency key to read. The action
        # digest still tells the same write from a different one.
        write = action
    return ToolCall(
        seq=raw.seq,
        tool=tool,
        action=action,
        result=result_digest if finished else None,
        ok=ok,
        turn=raw.turn,
        call_id=raw.call_id,
        span_id=raw.span_id,
        start_ns=raw.start_ns,
        end_ns=raw.end_ns,
        evidence=extract(rule.progress, args_value, result_value) if rule.progress else NO_EVIDENCE,
        trace_id=raw.trace_id,
        parent_id=raw.parent_id,
        write=write,
        write_key=write_key,
        flags=flags,
        exact=result_exact if finished else None,
        equivalence=eq,
    )
