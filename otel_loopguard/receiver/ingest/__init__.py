"""A request's bytes become span facts, each new or a duplicate.

Data flows: decode.py is the Python reference (the reading plans, the `Decoded` records, what
the conventions make of a span); decode_native.py builds the Rust decoder on it; decoder.py
chooses between the two (decode(), decode_in_pieces()); dedupe.py then tells each span new,
duplicate or conflict; inflight.py says which new spans another request is delivering right now
(a copy of one waits for that request to settle).
"""
