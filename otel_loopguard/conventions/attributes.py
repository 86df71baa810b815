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
RUN_CALLS = "loopguard.run.calls"  # on a root span: the tool calls the processor numbered in its trace's run
TURN = "loopguard.turn"
OUTCOME = "loopguard.outcome"
KEY_ID = "loopguard.key.id"
MODE = "loopguard.mode"
# v1.2: the processor numbers a run's calls 1..N with no gap; a gap in seqs marked so is
# missing evidence. Sequences without the mark only order calls (docs/findings.md).
SEQ_DENSE = "loopguard.seq.dense"

# Extensions read by the audit (docs/contract.md): how a run ended, guard decisions.
TERMINATION_REASON = "loopguard.termination_reason"
TERMINAL_RESPONSE = "loopguard.terminal_response"
GUARD = "loopguard.guard"
DISPATCHED = "loopguard.dispatched"
# On a tool span the processor found to be the same call as another, traced by a second
# instrumentation: the span id of the one that counts (readers skip this one).
DUPLICATE_OF = "loopguard.duplicate_of"

# v1.3 (issue 26): equivalence sketches of a tool call, never content (docs/equivalence.md).
# Written by the processor when it has the payloads; read back by conventions/sketches.py.
RESULT_SHAPE_DIGEST = "loopguard.result.shape_digest"  # 32 hex: the result in shape form, when it differs
RESULT_ITEMS = "loopguard.result.items"  # string[]: up to 32 keyed item hashes, 16 hex each
RESULT_ITEM_COUNT = "loopguard.result.item_count"  # int: content items in the result (before sampling)
RESULT_ITEMS_LEVEL = "loopguard.result.items_level"  # int: sampling level of RESULT_ITEMS, when above 0
RESULT_ECHOED = "loopguard.result.echoed"  # int: parts of the result that repeat the arguments, when above 0
RESULT_EMPTY_LIST = "loopguard.result.empty_list"  # true: the result holds an empty list (found nothing)
RESULT_FAILURE = "loopguard.result.failure"  # the result key (or `text`) that reports a failure
ARGS_SKETCH = "loopguard.args.sketch"  # 64 hex: the arguments' keyed similarity sketch
RESULT_SKETCH = "loopguard.result.sketch"  # 128 hex: a long text result's keyed similarity sketch
ARGS_NOOP = "loopguard.args.noop"  # true: the arguments are a shell command that does nothing (conventions/shell.py)
