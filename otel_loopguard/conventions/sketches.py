"""Equivalence sketches on a span and back (docs/equivalence.md, docs/contract.md).

`to_attributes` is what the processor adds to a tool span; `from_attributes` is what a
reader of tagged spans (the receiver's decode, the audit) hands the core as
`RawCall.equivalence`, so a call judged downstream is judged as it was in-process.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..calls import Equivalence
from ..canon.sketch import RESULT_SLOTS, from_hex, to_hex
from . import attributes as conv

MAX_WIRE_ITEMS = 32  # = fingerprint/equivalence.py ITEM_CAP: more on a span are ignored


# Every attribute an Equivalence travels in (the receiver's decode reads these and no others).
SKETCH_KEYS = (conv.RESULT_SHAPE_DIGEST, conv.RESULT_ITEMS, conv.RESULT_ITEM_COUNT, conv.RESULT_ITEMS_LEVEL,
               conv.RESULT_ECHOED, conv.RESULT_EMPTY_LIST, conv.RESULT_FAILURE, conv.ARGS_SKETCH, conv.ARGS_NOOP,
               conv.RESULT_SKETCH)


def to_attributes(eq: Equivalence) -> dict[str, Any]:
    """The span attributes of an Equivalence: only what is known and not a default."""
    out: dict[str, Any] = {}
    if eq.shape is not None:
        out[conv.RESULT_SHAPE_DIGEST] = eq.shape
    if eq.item_count is not None:
        out[conv.RESULT_ITEM_COUNT] = eq.item_count
        if eq.items:
            hexed = eq.items.hex()
            out[conv.RESULT_ITEMS] = [hexed[i:i + 16] for i in range(0, len(hexed), 16)]
        if eq.level:
            out[conv.RESULT_ITEMS_LEVEL] = eq.level
    if eq.echoed:
        out[conv.RESULT_ECHOED] = eq.echoed
    if eq.empty_list:
        out[conv.RESULT_EMPTY_LIST] = True
    if eq.failed is not None:
        out[conv.RESULT_FAILURE] = eq.failed
    if eq.sketch is not None:
        out[conv.ARGS_SKETCH] = to_hex(eq.sketch)
    if eq.noop:
        out[conv.ARGS_NOOP] = True
    if eq.result_sketch is not None:
        out[conv.RESULT_SKETCH] = to_hex(eq.result_sketch)
    return out


def from_attributes(attrs: Mapping[str, Any]) -> Optional[Equivalence]:
    """The Equivalence a tagged span carries, or None when it carries none (a span tagged by
    an older processor, or not tagged). Malformed values are ignored, never raised on."""
    count = _int(attrs.get(conv.RESULT_ITEM_COUNT))
    sketch = from_hex(attrs.get(conv.ARGS_SKETCH))
    shape = attrs.get(conv.RESULT_SHAPE_DIGEST)
    failed = attrs.get(conv.RESULT_FAILURE)
    noop = attrs.get(conv.ARGS_NOOP) is True
    result_sketch = from_hex(attrs.get(conv.RESULT_SKETCH), RESULT_SLOTS)
    if count is None and sketch is None and shape is None and failed is None and not noop and result_sketch is None:
        return None
    return Equivalence(
        shape=shape if isinstance(shape, str) else None,
        items=_items(attrs.get(conv.RESULT_ITEMS)) if count else b"",
        item_count=count,
        level=_int(attrs.get(conv.RESULT_ITEMS_LEVEL)) or 0,
        empty_list=attrs.get(conv.RESULT_EMPTY_LIST) is True,
        echoed=_int(attrs.get(conv.RESULT_ECHOED)) or 0,
        sketch=sketch,
        failed=failed if isinstance(failed, str) else None,
        noop=noop,
        result_sketch=result_sketch,
    )


def _int(v: Any) -> Optional[int]:
    return v if type(v) is int and v >= 0 else None


def _items(v: Any) -> bytes:
    if not isinstance(v, (list, tuple)):
        return b""
    out = set()
    for text in list(v)[:MAX_WIRE_ITEMS]:
        if isinstance(text, str) and len(text) == 16:
            try:
                out.add(bytes.fromhex(text))
            except ValueError:
                continue
    return b"".join(sorted(out))
