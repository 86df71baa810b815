"""The receiver's decode(): the native decoder (decode_native.py) when the Rust module is in
use, else the Python reference (decode.py); and decode_in_pieces() for a large request.

Above both decoders, so neither imports the other's chooser: the native path builds on the
reference's records and plans, the reference knows nothing of it.
"""

from __future__ import annotations

from typing import Optional

from ...otlp.pieces import cut
from .decode import DecodedRequest, TooManySpans, decode_python
from .decode_native import load as _load_native

# The native decoder when the Rust module is in use (decode_native.py: it builds on decode.py).
_native = _load_native()


def decode(data: bytes, run_id_attribute: Optional[str] = None, max_spans: Optional[int] = None) -> DecodedRequest:
    """Decode request bytes; raises DecodeError for bytes that are not a request, and
    TooManySpans (counted before any span is read) for one of more than `max_spans`. The
    native decoder (decode_native.py) answers when the Rust module is in use, else
    decode_python, the reference: the same records, errors and messages."""
    if _native is not None and data.__class__ is bytes:
        return _native(data, run_id_attribute, max_spans)
    return decode_python(data, run_id_attribute, max_spans)


def decode_in_pieces(data: bytes, run_id_attribute: Optional[str] = None, max_spans: Optional[int] = None,
                     piece_spans: int = 2048) -> DecodedRequest:
    """decode(), for a large request: parsed a piece of at most `piece_spans` spans at a time
    (otlp/pieces.py), so no single parse holds the interpreter long. Same records, same
    positions in the whole request, same errors."""
    pieces = cut(data, piece_spans)
    if pieces is None or len(pieces) < 2:
        return decode(data, run_id_attribute, max_spans)
    count = sum(p.spans for p in pieces)
    if max_spans is not None and count > max_spans:
        raise TooManySpans(count, max_spans)
    out = DecodedRequest([], [])
    for piece in pieces:
        part = decode(piece.data, run_id_attribute)
        for d in part.spans:
            d.where = (piece.resource, piece.scope, piece.first + d.where[2])
        out.spans += part.spans
        out.rejected += [((piece.resource, piece.scope, piece.first + i), why) for (_, _, i), why in part.rejected]
    return out
