"""A request's bytes become span facts, each new or a duplicate.

Data flows: reading.py (which attributes of a span are read, and what the conventions make of
them) is shared by the two decoders, decode_native.py (Rust) and decode.py (the Python
reference, which chooses between them); dedupe.py then tells each span new, duplicate or
conflict.
"""
