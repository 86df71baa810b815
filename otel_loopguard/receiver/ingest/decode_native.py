"""The receiver's decode in Rust (native/src/otlp.rs, native/src/decode.rs), beside the reference
decode.decode_python: the same records, the same rejections, the same errors and messages
(tests/native/test_decode_differential.py holds them to it).

Rust reads the wire: it checks the whole request as protobuf's parser does (framing, UTF-8 of
every string, nesting depth), counts its spans, and makes each span's `Decoded` record (ids,
times, content id) without Python. For the few spans that carry a marker, a tagged tool name,
run facts or guard decisions, it hands over the attribute values decode.py's plan names, and
decode.finish makes of them what _read_span does (the conventions stay in one place).

The module is chosen by native.py (OTEL_LOOPGUARD_PURE_PYTHON=1 forces Python);
without it `load()` gives None and decoder.py takes decode.py's own path.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from google.protobuf.message import DecodeError

from ...native import module as native_module
from ...otlp.lite import LiteRequest
from . import decode as reference

_log = logging.getLogger("otel_loopguard.receiver")
# protobuf's words for a request it cannot parse, before upb's status (otlp.rs Error::message).
_PREFIX = f"Error parsing message with type '{LiteRequest.DESCRIPTOR.full_name}': "

Decoder = Callable[[bytes, Optional[str], Optional[int]], "reference.DecodedRequest"]


def tables(module: Any) -> Any:
    """decode.py's reading plans and its record class, handed to the Rust module once."""
    return module.DecodeTables(decoded=reference.Decoded, **reference.reading_plans())


def decoder(module: Any) -> Decoder:
    """decode() on the Rust module."""
    handed = tables(module)
    native_decode = module.decode_request

    def decode(data: bytes, run_id_attribute: Optional[str] = None, max_spans: Optional[int] = None
               ) -> reference.DecodedRequest:
        got = native_decode(data, handed, run_id_attribute, max_spans)
        if got.__class__ is str:
            raise DecodeError(_PREFIX + got)
        if got.__class__ is int:
            raise reference.TooManySpans(got, max_spans or 0)
        spans, rejected, pending = got
        out = reference.DecodedRequest(spans, [(where, reference.rejected_because(name, trace_id, span_id, parent))
                                               for where, name, trace_id, span_id, parent in rejected])
        for d, name, status, values, decisions, run_values in pending:
            content = d.content
            try:
                reference.finish(d, name, status, values, decisions, run_values, run_id_attribute)
            except Exception:
                _unreadable(d, content)
        return out

    return decode


def _unreadable(d: "reference.Decoded", content: int) -> None:
    """decode._unreadable: passed on unjudged, under the content id every span's begins with."""
    _log.exception("span %s of trace %s could not be read; forwarded, not judged", d.span_id.hex(), d.trace_id.hex())
    d.content = content
    d.run_id = d.call = d.model = d.facts = d.guards = d.agent = d.tree = None


def load() -> Optional[Decoder]:
    """The native decode() when the Rust module is in use, else None."""
    module = native_module()
    if module is None:
        return None
    return decoder(module)
