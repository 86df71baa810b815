"""Failures a tool reports in its result while its span says OK (docs/equivalence.md).

A shell tool returns `{"exit_code": 1, "stdout": ...}` or "Command exited with code 2"; an
MCP tool returns `{"isError": true, ...}`; an HTTP-ish wrapper `{"success": false}`. The
span's status is unset in all of them, so without this the call counts as a success and an
`error_streak` never starts. Which keys count is the policy's (`equivalence.failure_fields`);
how each key is read is the convention's, below. Only the result's top level is read.
"""

from __future__ import annotations

import re
from typing import Any, Optional

# Read as a process exit status: a non-zero integer is a failure.
EXIT_STATUS_KEYS = frozenset({"exit_code", "exitCode", "returncode", "return_code", "exit_status", "exitStatus"})


def exit_status(failed: Optional[str]) -> bool:
    """The reported failure (`Equivalence.failed`) is a process's exit status, which also says
    "no match" or "a pipe closed early" over a valid answer, unlike an error flag."""
    return failed == "text" or failed in EXIT_STATUS_KEYS


# Read as "this is an error" flags: true is a failure.
ERROR_FLAG_KEYS = frozenset({"is_error", "isError", "failed"})
# Read as "this succeeded" flags: false is a failure.
SUCCESS_FLAG_KEYS = frozenset({"success", "ok", "succeeded"})
# Any other key named by the policy: present with a non-empty value (not null, false, 0, "",
# [] or {}) is a failure, as `"error": "permission denied"`.

# A status line of its own: "Exit code: 1", "Command exited with code 2", "[Process exited with
# code 1]", "returncode=127", "exit status 1"; at most four words before it. Prose that mentions
# an exit code inside a sentence (a search result about shell scripts) is no status line.
_TEXT = re.compile(
    r"(?im)^[ \t\[(]*(?:[\w:*,.-]+[ \t]+){0,4}"
    r"(?:exited(?:[ \t]+with)?(?:[ \t]+(?:code|status))?|exit[ \t_]?(?:code|status)|return[ \t_]?code|returncode)"
    r"[\"']?[ \t]*[:=]?[ \t]*(-?[1-9][0-9]{0,2})[ \t\])\].]*$")
# The same status line whatever its code, `0` included: a process's exit status is no content
# of its answer (fingerprint/items.py), as the exit-status keys of an object are not.
_STATUS_LINE = re.compile(
    r"(?i)[ \t\[(]*(?:[\w:*,.-]+[ \t]+){0,4}"
    r"(?:exited(?:[ \t]+with)?(?:[ \t]+(?:code|status))?|exit[ \t_]?(?:code|status)|return[ \t_]?code|returncode)"
    r"[\"']?[ \t]*[:=]?[ \t]*-?[0-9]{1,3}[ \t\])\].]*")
_HEAD_TAIL_CHARS = 400  # the text read at each end: a status line is a first or last line


def failure(value: Any, form: str, fields: tuple[str, ...], text: bool) -> Optional[str]:
    """The field (or `text`) that reports a failure in a parsed result, else None."""
    if form == "json" and isinstance(value, dict):
        for key in fields:
            if key in value and _fails(key, value[key]):
                return key
        return None
    if text and isinstance(value, str):
        return "text" if _text_fails(value) else None
    return None


def _fails(key: str, v: Any) -> bool:
    if key in EXIT_STATUS_KEYS:
        return type(v) is int and v != 0 or (isinstance(v, str) and v.strip().lstrip("-").isdigit() and int(v) != 0)
    if key in ERROR_FLAG_KEYS:
        return v is True
    if key in SUCCESS_FLAG_KEYS:
        return v is False
    return v not in (None, False, 0, "", [], {})


def _text_fails(text: str) -> bool:
    if len(text) <= 2 * _HEAD_TAIL_CHARS:
        return _TEXT.search(text) is not None
    return _TEXT.search(text, 0, _HEAD_TAIL_CHARS) is not None or _TEXT.search(text[-_HEAD_TAIL_CHARS:]) is not None


def is_status_line(line: str) -> bool:
    """`line` (stripped) is a process's exit status line of its own: "[Command finished with
    exit code 0]", "Exit code: 1", "returncode=127"."""
    return ("xit" in line or "eturn" in line) and _STATUS_LINE.fullmatch(line) is not None
