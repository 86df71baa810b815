"""Which tool calls a model span's record of its conversation says each model message asked for (pure).

OpenInference writes an LLM span's messages flattened, a requested call's id at
`llm.input_messages.<i>.message.tool_calls.<k>.tool_call.id` (and the same under
`llm.output_messages.` for the answer the span ends with). A call whose id is there was asked
for by message `i`; the calls one message asked for are one decision. The readers ask this only
where the span times cannot tell: a model span that is the parent of its calls spans them all
(Google ADK + OpenInference writes one LLM span per agent run, ending after every call of the
run, with the whole conversation: research/conventions/FINDINGS.md, 8.2).
"""

from __future__ import annotations

from typing import Any, Mapping

from .spec import OPENINFERENCE_MODEL

INPUT = "llm.input_messages."
OUTPUT = "llm.output_messages."
CALL_ID = ".tool_call.id"
TOOL_CALLS = ".message.tool_calls."


def requested_calls(attributes: Mapping[str, Any]) -> dict[str, int]:
    """call id -> the position in the conversation of the message that asked for it: input
    messages by their index, the output messages after them. A call id recorded twice (the
    last request is both the output of one turn and an input of the next) keeps its input."""
    marker = attributes.get(OPENINFERENCE_MODEL.marker)
    if type(marker) is not str or marker not in OPENINFERENCE_MODEL.marker_values:
        return {}  # only OpenInference's LLM spans keep this record: no other span's keys are scanned
    asked: dict[str, int] = {}
    answered: dict[str, int] = {}
    for key, value in attributes.items():
        if not key.endswith(CALL_ID) or TOOL_CALLS not in key or type(value) is not str or not value:
            continue
        if key.startswith(INPUT):
            into, rest = asked, key[len(INPUT):]
        elif key.startswith(OUTPUT):
            into, rest = answered, key[len(OUTPUT):]
        else:
            continue
        index = rest.split(".", 1)[0]
        if index.isdecimal():
            into[value] = min(into.get(value, int(index)), int(index))
    after = max(asked.values(), default=-1) + 1
    return {**{call: after + i for call, i in answered.items()}, **asked}
