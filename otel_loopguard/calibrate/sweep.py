"""Candidate policies from `--sweep KEY=VALUES` (pure).

One parameter at a time: each value of each sweep is one candidate, the policy file with
that one key changed; the policy as given is the `current` candidate every other is compared
with. Only keys that change how calls are judged may be swept (thresholds, budgets, caps):
the fingerprints of every candidate are then those of the current policy, so one
fingerprint pass serves them all. Keys that change fingerprints (ignore_fields, progress
rules, volatile fields) are refused with the reason.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import PolicyError
from ..policy import Policy, policy_from_mapping

CURRENT = "current"

# Judging keys, by where they sit: top-level sections, and per tool (`tools.<name>.`).
_SECTIONS = {
    "repeat": ("warn_at", "stop_at", "window", "mode", "allowed_repeats", "progress_resets"),
    "cycle": ("min_period", "max_period", "warn_at", "stop_at", "compare"),
    "error_streak": ("warn_at", "stop_at", "same_tool"),
    "no_progress": ("warn_at", "stop_at"),
    "budget": ("max_turns", "max_tool_calls", "max_cost_usd", "max_seconds", "warn_ratio"),
    # Equivalence switches read where calls are judged: every sketch is computed whatever
    # they say (fingerprint/equivalence.py), so one fingerprint pass serves them too.
    "equivalence": ("similarity", "shape", "items", "echo"),
}
_TOOL_KEYS = ("max_calls", "exempt_repeat", "loose_cycle")
_TOOL_SECTIONS = {"repeat": _SECTIONS["repeat"], "poll": ("max_polls", "deadline_seconds"),
                  "equivalence": _SECTIONS["equivalence"]}
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
MAX_VALUES = 200  # per sweep: a range typed with one zero too many is a mistake, not a plan


@dataclass(frozen=True)
class Candidate:
    """One policy to replay the runs under."""

    name: str  # `current`, or `<key>=<value>`
    key: Optional[str]  # the swept key (None for current)
    value: Any
    policy: Policy
    note: str = ""  # what else had to change (a warn level lowered to a lower stop)
    tool: Optional[str] = None  # the one tool a `tools.<tool>.` key changes the rule of


@dataclass(frozen=True)
class Sweep:
    key: str
    path: tuple[str, ...]
    values: tuple[Any, ...]


def parse_sweep(text: str) -> Sweep:
    """`repeat.stop_at=3..8`, `tools.search.max_calls=5,10,20`, `budget.max_cost_usd=0.5,1,null`."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise PolicyError(f"--sweep {text!r}: expected KEY=VALUES, e.g. repeat.stop_at=3..8")
    path = _path(key)
    parsed: list[Any] = []
    for item in values.split(","):
        parsed += _values(key, item.strip())
    if len(parsed) > MAX_VALUES:
        raise PolicyError(f"--sweep {key}: {len(parsed)} values; at most {MAX_VALUES} per sweep")
    return Sweep(key=key, path=path, values=tuple(dict.fromkeys(parsed)))


def _path(key: str) -> tuple[str, ...]:
    parts = tuple(key.split("."))
    if parts[0] == "tools":  # the tool's name is what lies between: it may hold dots (mcp.search)
        if len(parts) >= 3 and parts[-1] in _TOOL_KEYS and all(parts[1:-1]):
            return ("tools", ".".join(parts[1:-1]), parts[-1])
        if len(parts) >= 4 and parts[-1] in _TOOL_SECTIONS.get(parts[-2], ()) and all(parts[1:-2]):
            return ("tools", ".".join(parts[1:-2]), *parts[-2:])
    elif len(parts) == 2 and parts[1] in _SECTIONS.get(parts[0], ()):
        return parts
    raise PolicyError(
        f"--sweep {key}: not a key calibrate can sweep. It sweeps what judges calls, so that one "
        "fingerprint pass serves every candidate: " + ", ".join(f"{s}.{{{','.join(k)}}}" for s, k in _SECTIONS.items())
        + ", tools.<tool>.{max_calls,exempt_repeat,loose_cycle}, tools.<tool>.repeat.<key>, tools.<tool>.poll.{max_polls,"
        "deadline_seconds}, tools.<tool>.equivalence.{similarity,shape,items,echo}. Keys that change fingerprints "
        "(ignore_fields, progress, volatile fields, equivalence.failure_fields, item_fields, exempt): audit with "
        "each policy file instead"
    )


def _values(key: str, item: str) -> list[Any]:
    m = _RANGE.match(item)
    if m:
        low, high = int(m.group(1)), int(m.group(2))
        if high < low or high - low >= MAX_VALUES:
            raise PolicyError(f"--sweep {key}: range {item} must run upwards, at most {MAX_VALUES} values")
        return list(range(low, high + 1))
    lowered = item.lower()
    if lowered in ("null", "none", "off"):
        return [None]
    if lowered in ("true", "false"):
        return [lowered == "true"]
    for kind in (int, float):
        try:
            return [kind(item)]
        except ValueError:
            pass
    if item:
        return [item]  # a word (repeat.mode=window); the policy's own check says if it fits
    raise PolicyError(f"--sweep {key}: an empty value")


def candidates(base: Policy, data: Any, source: str, sweeps: list[Sweep]) -> list[Candidate]:
    """`current` (the policy as loaded), then one candidate per value of each sweep. `data`:
    the policy file's content, unvalidated (policy/load.py read_policy_data)."""
    out = [Candidate(name=CURRENT, key=None, value=None, policy=base)]
    for sweep in sweeps:
        for value in sweep.values:
            out.append(_candidate(base, data, source, sweep, value))
    return out


def _candidate(base: Policy, data: Any, source: str, sweep: Sweep, value: Any) -> Candidate:
    name = f"{sweep.key}={_show(value)}"
    tree = copy.deepcopy(data) if isinstance(data, dict) else {}
    tree["version"] = f"{base.version}+{name}"  # findings name the candidate they came from
    section = _section(tree, sweep.path[:-1])
    leaf = sweep.path[-1]
    if leaf == "stop_at":
        section.pop("allowed_repeats", None)  # the other spelling of the same limit
    elif leaf == "allowed_repeats":
        section.pop("stop_at", None)
    section[leaf] = value
    note = ""
    try:
        policy = policy_from_mapping(tree, f"{source} with --sweep {name}")
    except PolicyError as exc:
        if leaf not in ("stop_at", "allowed_repeats") or "warn_at: must be <= stop_at" not in str(exc):
            raise
        # A stop below the file's warn level: warn there too, rather than refuse the value.
        stop = value if leaf == "stop_at" else value + 1
        section["warn_at"] = stop
        note = f"warn_at lowered to {stop}"
        policy = policy_from_mapping(tree, f"{source} with --sweep {name}")
    tool = sweep.path[1] if sweep.path[0] == "tools" else None
    return Candidate(name=name, key=sweep.key, value=value, policy=policy, note=note, tool=tool)


def _section(tree: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = tree
    for part in path:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {} if child is None else child
            if not isinstance(child, dict):
                raise PolicyError(f"--sweep: {'.'.join(path)} in the policy file is not a mapping")
            node[part] = child
        node = child
    return node


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
