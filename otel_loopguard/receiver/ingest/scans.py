"""Attribute keys found by their shape, for the one kind of span whose reading plan asks.

A reading plan names its keys (decode.py), but an OpenInference LLM span writes its record of
the conversation flattened, one key per requested call
(`llm.input_messages.<i>.message.tool_calls.<k>.tool_call.id`), and a smolagents manager's
AGENT span the agents it manages (`smolagents.managed_agents.<i>.name`): those keys are found
by prefix and suffix. Only a span read by a plan whose marker says OpenInference LLM (its model
may be read by another convention's plan: Google ADK writes GenAI keys too), or AGENT, is
scanned; every other span pays nothing. Both decoders scan alike (decode.py here; the Rust one
from reading_plans()), so the values, and the content id made of them, are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from ...conventions.conversation import CALL_ID, INPUT, OUTPUT
from ...conventions.spec import OPENINFERENCE_MODEL, SMOLAGENTS_MANAGED

# Keys a scan keeps at most. A record holds one entry per call the conversation asked for, kept
# with the model decision until its run is judged: the cap bounds that per model span. Past it
# the record is dropped whole (OVERFLOW), so the span's calls keep the turns their times give,
# as before the record was read: a loop may go unseen there, never one made of a cut record.
MAX_SCANNED = 256
# Agents a manager's span lists, at most. Past it the list is dropped whole: its managed agents'
# runs are not counted as calls (never counted as another's).
MAX_DECLARED = 64
# The value a scan past its cap leaves in place of the keys (decode.py's `values`): no
# attribute is named so (a key with a NUL byte), so it cannot be forged by a span.
OVERFLOW = "\x00loopguard.scan.overflow"


@dataclass(frozen=True)
class Scan:
    """In a span whose `marker` is one of `marker_values`: the keys that start with one of
    `prefixes` and end with `suffix`, at most `cap` of them."""

    marker: str
    marker_values: frozenset[str]
    prefixes: tuple[str, ...]
    suffix: str
    cap: int = MAX_SCANNED


CONVERSATION = Scan(marker=OPENINFERENCE_MODEL.marker, marker_values=OPENINFERENCE_MODEL.marker_values,
                    prefixes=(INPUT, OUTPUT), suffix=CALL_ID)
DECLARED = Scan(marker=SMOLAGENTS_MANAGED.marker, marker_values=SMOLAGENTS_MANAGED.marker_values,
                prefixes=(SMOLAGENTS_MANAGED.declared_prefix,), suffix=SMOLAGENTS_MANAGED.declared_suffix,
                cap=MAX_DECLARED)
SCANS = (CONVERSATION, DECLARED)


def scanned(keys: Iterable[str], scan: Scan) -> Optional[list[str]]:
    """The keys `scan` finds, sorted (so both decoders give them in one order, whatever the
    order of the span's attributes); None when more than its cap match."""
    prefixes, suffix = scan.prefixes, scan.suffix
    found = [k for k in keys if k.endswith(suffix) and k.startswith(prefixes)]
    if len(found) > scan.cap:
        return None
    found.sort()
    return found


def marked(values: dict[str, Any], scan: Scan) -> bool:
    """Whether plan values (which hold every marker) are of a span `scan` is for."""
    marker = values.get(scan.marker)
    return marker.__class__ is str and marker in scan.marker_values


def plain(scans: tuple[Scan, ...] = SCANS) -> list[tuple[str, list[str], list[str], str, int]]:
    """The scans as plain data for the native decoder (decode.reading_plans)."""
    return [(s.marker, sorted(s.marker_values), list(s.prefixes), s.suffix, s.cap) for s in scans]
