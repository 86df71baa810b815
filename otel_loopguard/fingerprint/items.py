"""A result decomposed into the things it brings: its items (docs/equivalence.md).

- a list: each element is an item (a search hit with a `url` is that url: the same page
  re-ranked or re-snippeted is the same hit);
- text: each non-blank line;
- an object: the items of its lists and of its multi-line strings, and one more item for
  its other values together (a status object is one answer, not a bag of fields);
- a scalar: itself.

Items are compared in noise form (canon/shape.py: clock readings, durations, pids, attempt
counters, temp paths masked; ids kept). Status words and flags (`true`, `0`, "ok", "done")
are no content; parts equal to one of the call's own argument values are echoes (a write
acknowledging the path it was given), counted apart and never new.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Optional

from ..conventions.failures import EXIT_STATUS_KEYS, is_status_line
from ..canon.shape import noise, noise_parts
from ..paths import get_path
from ..policy import EquivalenceRule

MAX_ITEMS_SCANNED = 1000  # items read per result: a huge answer is judged on its first ones
MAX_DEPTH = 4  # object nesting followed to find lists and multi-line text
MAX_ECHO_TEXT = 4096
MIN_ECHO_CHARS = 3  # argument text searched for echoed lines (longer: whole values only)
# A value that says only "it worked": no content of its own.
ACK_WORDS = frozenset({"ok", "okay", "success", "successful", "succeeded", "done", "true", "false", "none", "null",
                       "created", "updated", "deleted", "removed", "saved", "written", "accepted", "applied",
                       "completed", "completed successfully", "no output", "(no output)", "command completed", "0"})

_ACK_OR_EMPTY = ACK_WORDS | {""}
# A number under such a key is a clock reading (how long it took, when), never what was asked for:
# `elapsed_ms`, `durationMs`, `took`, `latency_s`, `timestamp`.
_CLOCK_KEY = re.compile(r"(?i)(?:^|_|(?<=[a-z]))(?:elapsed|duration|took|latency|runtime|time_?taken|timestamp|"
                        r"started_?at|ended_?at)(?:_?(?:ms|us|ns|s|sec|secs|seconds|millis))?$")
_LONGEST_ACK = max(map(len, ACK_WORDS))


# Argument values looked for inside a result line (a quoted query), longest first.
MIN_QUOTE_CHARS = 8
MAX_QUOTE_CHARS = 512
MAX_QUOTES = 4
QUOTE = "\x00q\x00"
_QUOTE_MARKS = (('"', '"'), ("'", "'"), ("\u201c", "\u201d"), ("`", "`"))
# A line's list marker is its position, not its content: `[2] KIS Developers`, `3. Title`.
_LIST_MARKER = re.compile(r"(?:\[[0-9]{1,3}\]|[0-9]{1,3}[.)])[ \t]+(?=\S)")
# A relevance score or rank says how the engine ranked a hit, not what the hit is.
_RANK_KEY = re.compile(r"(?i)^[@_]?(?:search[._]?)?(?:relevance_?)?(?:score|relevance|similarity|distance|rank)$")
# A label made of one word and a number: `noop131`, `step-4`, `marker_12`.
_COUNTED = re.compile(r"([A-Za-z][A-Za-z_-]{2,}?)[-_#]?[0-9]{1,9}")
_WORD = re.compile(r"[A-Za-z][A-Za-z_-]{2,}")
MAX_ECHO_WORDS = 256


class Echo:
    """The call's own argument values, in noise form, to tell echoed parts of a result."""

    __slots__ = ("_values", "_text", "_words", "_quotes")

    def __init__(self, arguments: Any):
        values: set[str] = set()
        _collect(arguments, values, 0)
        self._values = values
        joined = "\n".join(sorted(values))
        self._text = joined if len(joined) <= MAX_ECHO_TEXT else ""
        self._words: Optional[frozenset[str]] = None  # the arguments' words, built on first need
        self._quotes: Optional[tuple[str, ...]] = None  # argument values looked for inside lines

    def unquoted(self, text: str) -> str:
        """`text` with the call's own longer argument values masked where it quotes them (in
        quotation marks): a header that repeats the query (`Results for "2fa reset":`) is the
        same line whatever the query; the rest of the line still counts."""
        quotes = self._quotes
        if quotes is None:
            quotes = self._quotes = tuple(sorted((v for v in self._values if MIN_QUOTE_CHARS <= len(v) <= MAX_QUOTE_CHARS
                                                  and "\n" not in v), key=len, reverse=True)[:MAX_QUOTES])
        for v in quotes:
            if v in text:
                for left, right in _QUOTE_MARKS:
                    quoted = f"{left}{v}{right}"
                    if quoted in text:
                        text = text.replace(quoted, QUOTE)
        return text

    def has(self, text: str) -> bool:
        # Strings only, of three characters or more: a number or a letter in the arguments
        # (a page number, an id) says nothing about a result that holds the same one.
        if len(text) < MIN_ECHO_CHARS:
            return False
        return text in self._values or text in self._text or self._counted(text)

    def _counted(self, text: str) -> bool:
        """One of the call's own words with a number glued on (`noop131` for `echo noop`): an
        echo with a counter, which counts the calls, not the answers (docs/equivalence.md)."""
        m = _COUNTED.fullmatch(text) if len(text) <= 40 and text[-1].isdigit() else None
        if m is None:
            return False
        if self._words is None:
            self._words = frozenset(w.lower() for w in _WORD.findall(self._text)[:MAX_ECHO_WORDS])
        return m.group(1).lower().rstrip("-_") in self._words


def _collect(v: Any, out: set[str], depth: int) -> None:
    if len(out) > MAX_ITEMS_SCANNED or depth > MAX_DEPTH + 2:
        return
    if isinstance(v, str):
        text = noise(v.strip())
        if text:
            out.add(text)
            if "\n" in text:
                out.update(line.strip() for line in text.splitlines() if line.strip())
    elif isinstance(v, dict):
        for x in v.values():
            _collect(x, out, depth + 1)
    elif isinstance(v, list):
        for x in v:
            _collect(x, out, depth + 1)


NO_ECHO = Echo(None)


class Items:
    """The decomposition of one result."""

    __slots__ = ("texts", "echoed", "empty_list")

    def __init__(self) -> None:
        self.texts: list[str] = []  # content items in noise form, in order, repeats allowed
        self.echoed = 0
        self.empty_list = False  # a list with no element: a read that found nothing

    def add(self, text: str, echo: Echo) -> None:
        if not text or (len(text) <= _LONGEST_ACK + 1 and text.lower().rstrip(".!") in ACK_WORDS):
            return
        if echo.has(text):
            self.echoed += 1
        elif len(self.texts) < MAX_ITEMS_SCANNED:
            self.texts.append(echo.unquoted(text))


def decompose(value: Any, form: str, rule: EquivalenceRule, echo: Echo, noised: Optional[str] = None) -> Items:
    """The items of a parsed result (`form` as canon.canonical.Parsed gives it); `noised`:
    a text result's masked head (canon.shape.noise_parts), the caller's, for the shape too."""
    out = Items()
    if noised is not None:
        _noised_lines(noised, echo, out)
        return out
    if rule.items_path and form == "json":
        inner = get_path(value, rule.items_path)
        value = value if inner is None else inner
    _value(value, rule, echo, out, 0)
    return out


def _value(v: Any, rule: EquivalenceRule, echo: Echo, out: Items, depth: int) -> None:
    if isinstance(v, str):
        _lines(v, echo, out)
    elif isinstance(v, list):
        _list(v, rule, echo, out)
    elif isinstance(v, dict):
        _object(v, rule, echo, out, depth)
    elif v is not None and not isinstance(v, bool):
        out.add(_scalar(v), echo)


def _lines(text: str, echo: Echo, out: Items) -> None:
    if "\n" not in text:
        out.add(noise(text.strip()), echo)
        return
    # One pass over the whole text: no noise pattern crosses a line break (canon/shape.py).
    _noised_lines(noise_parts(text)[0], echo, out)


def _noised_lines(text: str, echo: Echo, out: Items) -> None:
    """Items of text in noise form: the masked head of a long text only (noise_parts)."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            if is_status_line(line):
                continue  # the process's exit status: no content, as an exit_code key is not
            if _maybe_marked(line):
                line = _LIST_MARKER.sub("", line, count=1) if _LIST_MARKER.match(line) else line
            out.add(line, echo)
        if len(out.texts) >= MAX_ITEMS_SCANNED:
            return


def _maybe_marked(line: str) -> bool:
    """A cheap test before the marker pattern: a reader's numbered lines (`12\tx`) skip it."""
    head = line[:5]
    return head[0] == "[" or ("0" <= head[0] <= "9" and ("." in head or ")" in head))


def _list(items: list[Any], rule: EquivalenceRule, echo: Echo, out: Items) -> None:
    if not items:
        out.empty_list = True
    for element in items[:MAX_ITEMS_SCANNED]:
        if isinstance(element, str):
            out.add(noise(element.strip()), echo)
        elif isinstance(element, dict):
            key = _address(element, rule.item_fields)
            out.add(key if key is not None else noise(_json(_unranked(element))), echo)
        elif element is not None and not isinstance(element, bool):
            out.add(noise(_json(element)), echo)


@functools.lru_cache(maxsize=1024)
def _is_rank_key(key: str) -> bool:
    return _RANK_KEY.match(key) is not None  # keys repeat across elements and calls: cached


def _unranked(element: dict[str, Any]) -> dict[str, Any]:
    """A hit without its relevance score or rank: the same hit re-scored is the same hit."""
    for k in element:
        if isinstance(k, str) and _is_rank_key(k):
            return {k: v for k, v in element.items() if not (isinstance(k, str) and _is_rank_key(k))}
    return element


def _address(element: dict[str, Any], fields: tuple[str, ...]) -> Optional[str]:
    for name in fields:
        v = element.get(name)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and v != "":
            return f"\x00{name}\x00{v}"
    return None


def _object(obj: dict[str, Any], rule: EquivalenceRule, echo: Echo, out: Items, depth: int) -> None:
    rest: dict[str, Any] = {}
    for key in sorted(obj):
        v = obj[key]
        if isinstance(v, list):
            _list(v, rule, echo, out)
        elif isinstance(v, dict) and depth < MAX_DEPTH:
            _object(v, rule, echo, out, depth + 1)
        elif isinstance(v, str) and "\n" in v:
            _lines(v, echo, out)
        elif key in EXIT_STATUS_KEYS or (_CLOCK_KEY.search(key) and isinstance(v, (int, float))):
            continue  # the process's status (read as a failure or not) or a clock reading: no content
        elif not _trivial(v):
            text = noise(v.strip()) if isinstance(v, str) else noise(_json(v))
            if echo.has(text):
                out.echoed += 1
            else:
                rest[key] = echo.unquoted(text)
    if rest:
        out.add(_json(rest), NO_ECHO)


def _trivial(v: Any) -> bool:
    if v is None or isinstance(v, bool) or v == 0:
        return True
    return isinstance(v, str) and v.strip().lower().rstrip(".!") in _ACK_OR_EMPTY


def _scalar(v: Any) -> str:
    return "0" if v == 0 else noise(_json(v))


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
