"""Build a `Policy` from a mapping or a YAML/JSON file, with errors that name the key."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional

from ..errors import PolicyError
from ..canon.canonical import canonicalize
from .model import (
    EXACT_ONLY,
    CycleRule,
    EquivalenceRule,
    Policy,
    PollRule,
    Price,
    ProgressRule,
    RepeatRule,
    StreakRule,
    ToolRule,
)

Check = Callable[[Any, str], Any]


def _fail(path: str, expected: str, value: Any) -> PolicyError:
    return PolicyError(f"{path}: expected {expected}, got {json.dumps(value, default=repr)}")


def _int(minimum: int) -> Check:
    def check(v: Any, path: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise _fail(path, f"an integer >= {minimum}", v)
        return v

    return check


def _number(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != v:
        raise _fail(path, "a number >= 0", v)
    return float(v)


def _ratio(v: Any, path: str) -> float:
    v = _number(v, path)
    if not 0 < v <= 1:
        raise _fail(path, "a number in (0, 1]", v)
    return v


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise _fail(path, "true or false", v)
    return v


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise _fail(path, "a non-empty string", v)
    return v


def _strs(v: Any, path: str) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise _fail(path, "a list of strings", v)
    return tuple(_str(x, f"{path}[{i}]") for i, x in enumerate(v))


def _str_set(v: Any, path: str) -> frozenset[str]:
    return frozenset(_strs(v, path))


def _choice(*options: str) -> Check:
    def check(v: Any, path: str) -> str:
        if v not in options:
            raise _fail(path, "one of " + ", ".join(options), v)
        return str(v)

    return check


def _optional(check: Check) -> Check:
    return lambda v, path: None if v is None else check(v, path)


def _mapping(v: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise _fail(path or "top level", "a mapping", v)
    for k in v:
        if not isinstance(k, str):
            raise PolicyError(f"{path}: keys must be strings, got {k!r}")
    return v


def _fields(data: Any, path: str, schema: Mapping[str, Check]) -> dict[str, Any]:
    data = _mapping(data, path)
    out: dict[str, Any] = {}
    for key, value in data.items():
        check = schema.get(key)
        if check is None:
            known = ", ".join(sorted(schema))
            raise PolicyError(f"{_join(path, key)}: unknown key (known keys: {known})")
        out[key] = check(value, _join(path, key))
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


POS = _int(1)

_REPEAT = {
    "mode": _choice("consecutive", "window"),
    "warn_at": POS,
    "stop_at": POS,
    "window": POS,
    "allowed_repeats": POS,
    "progress_resets": _bool,
}
_CYCLE = {"min_period": _int(2), "max_period": _int(2), "warn_at": _int(2), "stop_at": _int(2),
          "compare": _choice("actions", "results")}
_STREAK = {"warn_at": POS, "stop_at": POS}
_ERROR_STREAK = {**_STREAK, "same_tool": _bool}
_BUDGET = {
    "max_turns": _optional(POS),
    "max_tool_calls": _optional(POS),
    "max_cost_usd": _optional(_number),
    "max_seconds": _optional(_number),
    "warn_ratio": _ratio,
}
_PROGRESS = {
    "version_field": _str,
    "state_field": _str,
    "terminal_states": _strs,
    "cursor_field": _str,
    "items_field": _str,
    "item_id_field": _str,
    "errors_field": _str,
}
def _similarity(v: Any, path: str) -> Optional[float]:
    return None if v is None else _ratio(v, path)


# equivalence, at the top level and per tool (docs/equivalence.md). `exempt_tools` is a list
# of tools at the top level; `exempt` a switch per tool: each is refused where the other belongs.
_EQUIVALENCE = {
    "shape": _bool,
    "items": _bool,
    "echo": _bool,
    "similarity": _similarity,
    "failure_fields": _strs,
    "failure_text": _bool,
    "item_fields": _strs,
    "items_path": _optional(_str),
    "sketch_fields": _strs,
}
_EQUIVALENCE_TOP = {**_EQUIVALENCE, "exempt_tools": _str_set}
_EQUIVALENCE_TOOL = {**_EQUIVALENCE, "exempt": _bool}


def _equivalence(data: Any, path: str, base: EquivalenceRule, schema: Mapping[str, Check]) -> EquivalenceRule:
    values = _fields(data, path, schema)
    rule = replace(base, exempt_tools=frozenset(), **values) if schema is _EQUIVALENCE_TOOL else replace(base, **values)
    return EXACT_ONLY if rule.exempt else rule


_POLL = {"max_polls": _optional(POS), "deadline_seconds": _optional(_number)}
_PRICE = {"input": _number, "output": _number}


def _repeat(data: Any, path: str, base: RepeatRule) -> RepeatRule:
    values = _fields(data, path, _REPEAT)
    allowed = values.pop("allowed_repeats", None)
    if allowed is not None:
        if "stop_at" in values:
            raise PolicyError(f"{path}: give allowed_repeats or stop_at, not both")
        # Seed rule: `allowed_repeats` identical calls pass, the next one is the finding.
        values["stop_at"] = allowed + 1
        values.setdefault("warn_at", min(base.warn_at, allowed + 1))
    rule = replace(base, **values)
    _ordered(rule.warn_at, rule.stop_at, path)
    if rule.mode == "window" and rule.window < rule.stop_at:
        raise PolicyError(f"{path}.window: must be >= stop_at ({rule.stop_at})")
    return rule


def _ordered(warn_at: int, stop_at: int, path: str) -> None:
    if warn_at > stop_at:
        raise PolicyError(f"{path}.warn_at: must be <= stop_at ({warn_at} > {stop_at})")


def _price(data: Any, path: str) -> Price:
    values = _fields(data, path, _PRICE)
    for key in _PRICE:
        if key not in values:
            raise PolicyError(f"{path}.{key}: missing (USD per million tokens)")
    return Price(**values)


def _cycle(data: Any, path: str) -> CycleRule:
    rule = replace(CycleRule(), **_fields(data, path, _CYCLE))
    if rule.min_period > rule.max_period:
        raise PolicyError(f"{path}.min_period: must be <= max_period")
    _ordered(rule.warn_at, rule.stop_at, path)
    return rule


def _streak(data: Any, path: str, base: StreakRule, schema: Mapping[str, Check] = _STREAK) -> StreakRule:
    rule = replace(base, **_fields(data, path, schema))
    _ordered(rule.warn_at, rule.stop_at, path)
    return rule


def _tool(data: Any, path: str, base_repeat: RepeatRule, base_eq: EquivalenceRule) -> ToolRule:
    schema: dict[str, Check] = {
        "exempt_repeat": _bool,
        "loose_cycle": _bool,
        "repeat": lambda v, p: _repeat(v, p, base_repeat),
        "progress": lambda v, p: ProgressRule(**_fields(v, p, _PROGRESS)),
        "ignore_fields": _strs,
        "defaults": lambda v, p: MappingProxyType(dict(_mapping(v, p))),
        "identity_fields": _strs,
        "side_effect": _bool,
        "idempotency_key": _str,
        "poll": lambda v, p: PollRule(**_fields(v, p, _POLL)),
        "max_calls": POS,
        "result_volatile_fields": _str_set,
        "enforce": _bool,
        "volatile_values": _bool,
        "meaningful_fields": _strs,
        "equivalence": lambda v, p: _equivalence(v, p, base_eq, _EQUIVALENCE_TOOL),
    }
    values = _fields(data, path, schema)
    if values.get("idempotency_key") and values.get("side_effect") is False:
        raise PolicyError(f"{path}.idempotency_key: only side_effect tools take an idempotency key")
    if values.get("idempotency_key"):
        values["side_effect"] = True
    clash = set(values.get("identity_fields", ())) & set(values.get("ignore_fields", ()))
    if clash:
        raise PolicyError(f"{path}: identity fields cannot be ignored: {', '.join(sorted(clash))}")
    return ToolRule(**values)


def policy_from_mapping(data: Any, source: str = "policy") -> Policy:
    """Validate `data` (as parsed from YAML/JSON) into a Policy."""
    try:
        return _policy(data, source)
    except PolicyError as exc:
        raise PolicyError(f"{source}: {exc}") from None


def _policy(data: Any, source: str) -> Policy:
    base = Policy()
    data = _mapping({} if data is None else data, "")
    repeat = _repeat(data["repeat"], "repeat", base.repeat) if "repeat" in data else base.repeat
    eq = (_equivalence(data["equivalence"], "equivalence", base.equivalence, _EQUIVALENCE_TOP)
          if "equivalence" in data else base.equivalence)
    schema: dict[str, Check] = {
        "version": _str,
        "repeat": lambda v, p: repeat,
        "cycle": _cycle,
        "error_streak": lambda v, p: _streak(v, p, base.error_streak, _ERROR_STREAK),
        "no_progress": lambda v, p: _streak(v, p, base.no_progress),
        "budget": lambda v, p: replace(base.budget, **_fields(v, p, _BUDGET)),
        "prices": lambda v, p: MappingProxyType({m: _price(x, f"{p}.{m}") for m, x in _mapping(v, p).items()}),
        "result_volatile_fields": _str_set,
        "volatile_values": _bool,
        "max_depth": _int(1),
        "max_bytes": _int(64),
        "tools": lambda v, p: MappingProxyType(
            {t: _tool(x, f"{p}.{t}", repeat, eq) for t, x in _mapping(v, p).items()}
        ),
        "equivalence": lambda v, p: eq,
    }
    values = _fields(data, "", schema)
    if eq.exempt_tools:  # each exempt tool gets a rule of its own that says so
        tools = dict(values.get("tools", {}))
        for name in sorted(eq.exempt_tools):
            tools[name] = replace(tools.get(name) or ToolRule(), equivalence=EXACT_ONLY)
        values["tools"] = MappingProxyType(tools)
    values.setdefault("version", content_version(data))
    return Policy(**values)


def content_version(data: Any) -> str:
    """A version for a policy that names none: a hash of its canonical content."""
    text = canonicalize(data).text
    return "sha256:" + hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:12]


# Named policies shipped with the package (otel_loopguard/presets/<name>.yaml): `--policy NAME`.
PRESETS = ("seed-001",)
_PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"


def preset_path(name: str) -> Optional[Path]:
    """The packaged file of a named preset, or None when `name` is no preset's name."""
    return _PRESET_DIR / f"{name}.yaml" if name in PRESETS else None


def check_replacement(old: Policy, new: Policy, source: str) -> bool:
    """Whether `new` (read from `source`) should replace `old`: False when the rules are the
    same; a PolicyError when they changed but the version did not, since findings would then
    name one version for two sets of rules."""
    if new == old:
        return False
    if new.version == old.version:
        raise PolicyError(f"{source}: its rules changed but its version ({old.version}) did not; "
                          "give it a new version (or remove `version:` to use a content hash)")
    return True


def load_policy(path: Optional[str | os.PathLike[str]]) -> Policy:
    """The built-in policy for None, else the YAML or JSON file at `path`, else (no such
    file) the named preset (`seed-001`)."""
    if path is None:
        return Policy()
    data, source = read_policy_data(path)
    return policy_from_mapping(data, source)


def read_policy_data(path: Optional[str | os.PathLike[str]]) -> tuple[Any, str]:
    """The parsed, not yet validated content of a policy file or preset (as `load_policy`
    finds it), and its name for errors: calibrate changes thresholds in it before validating."""
    if path is None:
        return {}, "built-in policy"
    import yaml  # imported here: only policy files need it

    p = Path(path)
    preset = preset_path(str(path))
    if preset is not None and not p.exists():  # a file of that name in the working folder wins
        p = preset
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {p}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise PolicyError(f"policy file {p} is not UTF-8 text (byte {exc.start})") from None
    if p.suffix.lower() == ".json":
        try:  # JSON files are read as JSON: YAML rejects tab indents and pairs \u escapes wrongly
            data = json.loads(text)
        except ValueError as exc:
            raise PolicyError(f"{p}: not valid JSON: {exc}") from None
        except RecursionError:
            raise PolicyError(f"{p}: nested too deeply to read") from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PolicyError(f"{p}: not valid YAML: {exc}") from None
        except RecursionError:
            raise PolicyError(f"{p}: nested too deeply to read") from None
    return data, str(p)
