"""RawCall -> ToolCall: the one place where shells' input becomes detector input."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..calls import RawCall, ToolCall
from ..canon.canonical import NO_FLAGS
from ..progress import extract
from ..progress.evidence import NO_EVIDENCE
from .fingerprinter import Fingerprinter


def fingerprint_call(raw: RawCall, fp: Fingerprinter) -> ToolCall:
    """Digest arguments and result (unless precomputed) and extract progress evidence."""
    return fingerprint_finished(
        fp, seq=raw.seq, tool=raw.tool, arguments=raw.arguments, result=raw.result, ok=raw.ok, turn=raw.turn,
        call_id=raw.call_id, span_id=raw.span_id, start_ns=raw.start_ns, end_ns=raw.end_ns, trace_id=raw.trace_id,
        parent_id=raw.parent_id, finished=raw.finished, identity=raw.identity, args_digest=raw.args_digest,
        result_digest=raw.result_digest, result_exact=raw.result_exact_digest,
    )


def fingerprint_finished(
    fp: Fingerprinter,
    *,
    seq: int,
    tool: str,
    arguments: Any,
    result: Any,
    ok: Optional[bool],
    turn: Optional[int],
    call_id: Optional[str],
    span_id: Optional[str],
    start_ns: Optional[int],
    end_ns: Optional[int],
    trace_id: Optional[str],
    parent_id: Optional[str],
    finished: bool = True,
    identity: Optional[Mapping[str, Any]] = None,
    args_digest: Optional[str] = None,
    result_digest: Optional[str] = None,
    result_exact: Optional[str] = None,
) -> ToolCall:
    """`fingerprint_call` without building the RawCall first: the in-process processor calls
    it once per tool span with a finished call's raw payloads (the defaults)."""
    rule = fp.policy.rule(tool)
    args_value = None
    flags: frozenset[str] = NO_FLAGS
    action = args_digest
    if rule.progress or rule.side_effect:  # the parsed value is needed: evidence, write key
        digest, flags, args_value = fp.action_parts(tool, rule, arguments, identity)
        action = action or digest
    elif action is None:
        action, flags = fp.action_digest(tool, rule, arguments, identity)
    result_value = None
    if finished and (result_digest is None or rule.progress):
        if rule.progress:
            digest, result_flags, result_value, exact = fp.result_full(tool, rule, result)
        else:
            digest, result_flags, exact = fp.result_digests(tool, rule, result)
        if result_digest is None:  # else both digests came with the call (a tagged span)
            result_digest, result_exact = digest, exact
        if result_flags:
            flags = flags | {f"result:{f}" for f in result_flags}
    write = write_key = None
    if rule.side_effect and arguments is not None:
        write, write_key = fp.write(tool, args_value, identity)
    elif rule.side_effect:
        # Redacted span: no arguments, so no idempotency key to read. The action
        # digest still tells the same write from a different one.
        write = action
    return ToolCall(
        seq=seq,
        tool=tool,
        action=action,
        result=result_digest if finished else None,
        ok=ok if finished else None,
        turn=turn,
        call_id=call_id,
        span_id=span_id,
        start_ns=start_ns,
        end_ns=end_ns,
        evidence=extract(rule.progress, args_value, result_value) if rule.progress else NO_EVIDENCE,
        trace_id=trace_id,
        parent_id=parent_id,
        write=write,
        write_key=write_key,
        flags=flags,
        exact=result_exact if finished else None,
    )
