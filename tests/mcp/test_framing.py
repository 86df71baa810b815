"""The framing and the session's bookkeeping, without processes."""

from __future__ import annotations

from otel_loopguard.mcp.framing import LineSplitter, parse


def test_lines_come_out_whole_with_their_own_bytes_whatever_the_reads() -> None:
    stream = b'{"a":1}\n{"b": 2}\r\n\n{"c":3}'
    for cut in range(1, len(stream)):
        splitter = LineSplitter()
        pieces = splitter.feed(stream[:cut]) + splitter.feed(stream[cut:]) + splitter.rest()
        assert b"".join(p.data for p in pieces) == stream
        assert [p.data for p in pieces] == [b'{"a":1}\n', b'{"b": 2}\r\n', b"\n", b'{"c":3}']
        assert all(p.whole for p in pieces)


def test_a_line_longer_than_the_bound_passes_unparsed_and_the_next_is_parsed_again() -> None:
    splitter = LineSplitter(max_line=8)
    pieces = splitter.feed(b'{"long": "0123456789"') + splitter.feed(b'}\n{"x":1}\n')
    assert b"".join(p.data for p in pieces) == b'{"long": "0123456789"}\n{"x":1}\n'
    assert [p.whole for p in pieces] == [False, False, True]
    assert parse(pieces[-1].data) == {"x": 1}


def test_parse_says_none_for_what_is_not_json() -> None:
    assert parse(b"{oops\n") is None and parse(b"\n") is None and parse(b"\xff\xfe\n") is None
    assert parse(b"[1, 2]\n") == [1, 2]
