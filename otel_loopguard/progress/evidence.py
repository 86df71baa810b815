"""Extract the few values a declared progress rule compares from one observation."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

from ..calls import Evidence
from ..canon.shape import shape
from ..paths import get_path
from ..policy import ProgressRule

MAX_ITEMS_PER_OBSERVATION = 1000
NO_EVIDENCE = Evidence()  # shared: most tools declare no progress rule


def extract(rule: Optional[ProgressRule], arguments: Any, result: Any) -> Evidence:
    """Evidence from parsed arguments and result. Missing fields stay None. The state is kept
    in shape form (canon/shape.py): "running (12s elapsed)" and "running (14s elapsed)" are
    one state; the terminal check reads it as it is."""
    if rule is None:
        return NO_EVIDENCE
    state = _state(rule, result)
    return Evidence(
        version=_number(get_path(result, rule.version_field)) if rule.version_field else None,
        state=shape(state) if state is not None else None,
        terminal=state is not None and state in rule.terminal_states,
        cursor=_short(get_path(arguments, rule.cursor_field)) if rule.cursor_field else None,
        item_ids=_item_ids(rule, result),
        error_count=_count(get_path(result, rule.errors_field)) if rule.errors_field else None,
    )


def _state(rule: ProgressRule, result: Any) -> Optional[str]:
    if not rule.state_field:
        return None
    value = get_path(result, rule.state_field)
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _number(v: Any) -> Optional[float]:
    # bool is an int in Python, but `true` is not a version.
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _count(v: Any) -> Optional[int]:
    if isinstance(v, list):
        return len(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return None


def _item_ids(rule: ProgressRule, result: Any) -> tuple[int, ...]:
    if not rule.items_field:
        return ()
    items = get_path(result, rule.items_field)
    if not isinstance(items, list):
        return ()
    ids = []
    for item in items[:MAX_ITEMS_PER_OBSERVATION]:
        value = get_path(item, rule.item_id_field) if isinstance(item, dict) else item
        if value is not None:
            ids.append(_hash64(value))
    return tuple(ids)


def _short(v: Any) -> Optional[str]:
    return None if v is None else json.dumps(v, sort_keys=True, ensure_ascii=False)


def _hash64(v: Any) -> int:
    # Python's hash() is salted per process; a fixed hash keeps verdicts reproducible.
    text = json.dumps(v, sort_keys=True, ensure_ascii=False, default=str)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")
