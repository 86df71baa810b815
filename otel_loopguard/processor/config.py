"""In-process settings: arguments beat OTEL_LOOPGUARD_* variables beat defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional

from ..errors import LoopguardError
from ..mode import MODES


class ProcessorConfigError(LoopguardError):
    """An install() argument or OTEL_LOOPGUARD_* variable is invalid; names the setting."""


@dataclass(frozen=True)
class ProcessorConfig:
    mode: str = "observe"  # enforce: the guard adapters deny looping calls before dispatch
    redact: bool = False  # remove raw arguments/results from exported tool spans
    policy: Optional[str] = None  # policy file (YAML/JSON)
    run_id_attribute: Optional[str] = None  # e.g. gen_ai.conversation.id (default: the trace)
    agent_scopes: bool = False  # a subagent's calls form their own run inside the trace
    queue_size: int = 10_000  # tool/model spans waiting to be tagged; beyond: exported untagged
    max_runs: int = 10_000  # runs whose state is kept in memory (least recent dropped)
    policy_reload_seconds: float = 2.0  # look at the policy file this often when a run opens (0: never)
    mark_root: bool = True  # a stopped run's root span leaves with status ERROR (root.py), unless the app set one

    def validate(self) -> "ProcessorConfig":
        for name, kind in _KINDS.items():  # install(redact="false") must not mean redact=True
            value = getattr(self, name)
            if value is not None and (type(value) is not kind):
                raise ProcessorConfigError(f"{name}: expected {_KIND_NAMES[kind]}, got {value!r}")
        if self.mode not in MODES:
            raise ProcessorConfigError(f"mode: expected one of {', '.join(MODES)}, got {self.mode!r}")
        if self.queue_size < 1 or self.max_runs < 1:
            raise ProcessorConfigError("queue_size and max_runs must be >= 1")
        if self.policy_reload_seconds < 0:
            raise ProcessorConfigError(f"policy_reload_seconds must be >= 0 (0: never), got {self.policy_reload_seconds!r}")
        return self


_KINDS = {"mode": str, "redact": bool, "policy": str, "run_id_attribute": str, "agent_scopes": bool,
          "queue_size": int, "max_runs": int, "policy_reload_seconds": float, "mark_root": bool}
_KIND_NAMES = {str: "text", bool: "True or False", int: "an integer", float: "a number"}

_ENV = {
    "mode": "OTEL_LOOPGUARD_MODE",
    "redact": "OTEL_LOOPGUARD_REDACT",
    "policy": "OTEL_LOOPGUARD_POLICY",
    "run_id_attribute": "OTEL_LOOPGUARD_RUN_ID_ATTRIBUTE",
    "agent_scopes": "OTEL_LOOPGUARD_AGENT_SCOPES",
    "queue_size": "OTEL_LOOPGUARD_QUEUE_SIZE",
    "max_runs": "OTEL_LOOPGUARD_MAX_RUNS",
    "policy_reload_seconds": "OTEL_LOOPGUARD_POLICY_RELOAD_SECONDS",
    "mark_root": "OTEL_LOOPGUARD_MARK_ROOT",
}


def resolve(arguments: Mapping[str, Any], env: Optional[Mapping[str, str]] = None) -> ProcessorConfig:
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for name, var in _ENV.items():
        raw = env.get(var)
        if raw:
            values[name] = _coerce(name, raw, var)
    values.update({k: v for k, v in arguments.items() if v is not None})
    if isinstance(values.get("policy"), os.PathLike):
        values["policy"] = os.fspath(values["policy"])
    if type(values.get("policy_reload_seconds")) is int:  # 5 means 5.0 here
        values["policy_reload_seconds"] = float(values["policy_reload_seconds"])
    return replace(ProcessorConfig(), **values).validate()


def _coerce(name: str, raw: str, var: str) -> Any:
    value = _convert(name, raw, var)
    try:  # each variable checked on its own, so the error names it
        replace(ProcessorConfig(), **{name: value}).validate()
    except ProcessorConfigError as exc:
        raise ProcessorConfigError(f"{var}: {exc}") from None
    return value


def _convert(name: str, raw: str, var: str) -> Any:
    default = getattr(ProcessorConfig(), name)
    if isinstance(default, bool):
        lowered = raw.strip().lower()
        if lowered not in ("true", "false", "1", "0"):
            raise ProcessorConfigError(f"{var}: expected true or false, got {raw!r}")
        return lowered in ("true", "1")
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise ProcessorConfigError(f"{var}: expected an integer, got {raw!r}") from None
    if isinstance(default, float):
        try:
            value = float(raw)
        except ValueError:
            raise ProcessorConfigError(f"{var}: expected a number of seconds, got {raw!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ProcessorConfigError(f"{var}: expected a finite number of seconds, got {raw!r}")
        return value
    return raw.strip()
