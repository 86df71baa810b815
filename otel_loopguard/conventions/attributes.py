"""Names of the attributes otel-loopguard writes and reads (CONTRACT.md)."""

from __future__ import annotations

# Section 1: added to tool spans by the in-process processor.
TOOL_NAME = "loopguard.tool.name"
ARGS_DIGEST = "loopguard.args.digest"
RESULT_DIGEST = "loopguard.result.digest"
# v1.2: the result digest before id- and time-shaped values were masked, only when masking
# changed it (RESULT_DIGEST is the masked one, as the contract's "volatile fields removed").
RESULT_EXACT_DIGEST = "loopguard.result.exact_digest"
SEQ = "loopguard.seq"
RUN_ID = "loopguard.run.id"
TURN = "loopguard.turn"
OUTCOME = "loopguard.outcome"
KEY_ID = "loopguard.key.id"
MODE = "loopguard.mode"
# v1.2: the processor numbers a run's calls 1..N with no gap; a gap in seqs marked so is
# missing evidence. Sequences without the mark only order calls (docs/findings.md).
SEQ_DENSE = "loopguard.seq.dense"

# Extensions read by the audit (docs/telemetry.md): how a run ended, guard decisions.
TERMINATION_REASON = "loopguard.termination_reason"
TERMINAL_RESPONSE = "loopguard.terminal_response"
GUARD = "loopguard.guard"
DISPATCHED = "loopguard.dispatched"
# On a tool span the processor found to be the same call as another, traced by a second
# instrumentation: the span id of the one that counts (readers skip this one).
DUPLICATE_OF = "loopguard.duplicate_of"
