"""Dotted paths into parsed JSON values (`options.limit`, `page.cursor`)."""

from __future__ import annotations

import json
from typing import Any, Mapping

_MISSING = object()


def get_path(value: Any, path: str, default: Any = None) -> Any:
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return default
        value = value[part]
    return value


def without_paths(value: Any, paths: Mapping[str, Any] | tuple[str, ...], match: bool) -> Any:
    """A copy of `value` without the given paths (copy-on-write along each path).

    With `match`, `paths` maps path -> default and a path is removed only when
    its value equals the default (an explicit default equals an omitted field).
    """
    for path in paths:
        expected = paths[path] if match else _MISSING  # type: ignore[call-overload]  # a Mapping when match
        value = _drop(value, path.split("."), expected)
    return value


def _drop(value: Any, parts: list[str], expected: Any) -> Any:
    if not isinstance(value, Mapping) or parts[0] not in value:
        return value
    head, rest = parts[0], parts[1:]
    current = value[head]
    if rest:
        replaced = _drop(current, rest, expected)
        if replaced is current:
            return value
        return {**value, head: replaced}
    if expected is not _MISSING and not _same(current, expected):
        return value
    return {k: v for k, v in value.items() if k != head}


def _same(a: Any, b: Any) -> bool:
    # 1 == True == 1.0 in Python; a documented default of 1 must not absorb `true`
    # or `1.0`, at any depth: compare the JSON text, which keeps those apart.
    try:
        return _text(a) == _text(b)
    except (TypeError, ValueError):
        return False


def _text(v: Any) -> str:
    return json.dumps(v, sort_keys=True, ensure_ascii=False, allow_nan=True)
