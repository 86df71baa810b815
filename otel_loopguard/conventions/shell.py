"""Shell commands that change nothing and learn nothing (docs/equivalence.md).

An agent that has run out of things to do often keeps calling its shell with a ritual:
`true`, `:`, `echo "All set."`, `cd <repo> && true`. Each is a new action answering an empty
or echoed success, which a distinct side effect also answers (`mkdir -p x`, `echo a >> f`),
so the answer alone cannot tell the two apart; the command can. A no-op is a command line
whose every part is one of the commands below, with literal arguments only: no redirect,
pipe, substitution, expansion or background job (any of them may write or read something).

The command is read from the arguments' `command`/`cmd`/`script` key: a string, or an argv
list (`["bash", "-lc", "<line>"]`: the line after a shell's `-c` flag; else the argv itself).
"""

from __future__ import annotations

import re
from typing import Any

COMMAND_KEYS = ("command", "cmd", "script")
# Commands with no effect and no output of their own (echo and printf print only their words).
NOOP_COMMANDS = frozenset({"true", ":", "echo", "printf", "cd", "pwd"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "/bin/sh", "/bin/bash", "/usr/bin/bash",
                     "/bin/zsh", "/usr/bin/env"})
MAX_LINE = 512  # a longer command line is work, whatever it starts with
# Anything that may read or write beyond printing the words: redirects, pipes, substitutions,
# expansions, globs, background jobs, subshells, here-docs.
_EFFECT = re.compile(r"[<>|`$*?\[\]{}()&\\]")
_SEPARATORS = re.compile(r"\s*(?:&&|;|\n)\s*")
_WORD = re.compile(r"\"[^\"]*\"|'[^']*'|[^\s\"']+")


def is_noop(arguments: Any) -> bool:
    """The arguments name a shell command line that changes nothing and reads nothing."""
    if not isinstance(arguments, dict):
        return False
    for key in COMMAND_KEYS:
        if key in arguments:
            line = _line(arguments[key])
            return line is not None and _noop_line(line)
    return False


def _line(command: Any) -> str | None:
    if isinstance(command, str):
        return command
    if not isinstance(command, list) or not command or not all(isinstance(w, str) for w in command):
        return None
    if command[0] in _SHELLS or command[0].rsplit("/", 1)[-1] in _SHELLS:
        flags = [i for i, w in enumerate(command) if w.startswith("-") and w.endswith("c") and i < 3]
        if flags and flags[0] + 1 < len(command):
            return command[flags[0] + 1]
        return None  # a shell running a script file: work
    return " ".join(command)


def _noop_line(line: str) -> bool:
    if not line.strip() or len(line) > MAX_LINE:
        return False
    # `&&` and `;` only join parts; any other `&`, `|`, `$`... is an effect.
    parts = _SEPARATORS.split(line.strip())
    for part in parts:
        words = _WORD.findall(part)
        if not words or words[0] not in NOOP_COMMANDS:
            return False
        if any(_effect(w) for w in words[1:]):
            return False
    return True


def _effect(word: str) -> bool:
    if word[:1] == "'":
        return False  # single quotes: literal
    if word[:1] == '"':
        return "$" in word or "`" in word or "\\" in word  # double quotes still expand these
    return _EFFECT.search(word) is not None
