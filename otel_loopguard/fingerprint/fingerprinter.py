"""Keyed fingerprints of actions, results and writes, under a policy.

An action is the tool name + its canonical arguments (after only the
normalisation the tool's policy declares) + declared identity values.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Mapping, NamedTuple, Optional

from ..policy import Policy, ToolRule
from .canonical import NO_FLAGS, Canonical, Parsed, parse, serialise
from .keys import DigestKey
from ..paths import get_path, without_paths


class Fingerprint(NamedTuple):
    digest: str
    flags: frozenset[str]
    value: Any  # the parsed value after normalisation (opaque text for "text" form)


@lru_cache(maxsize=4096)
def _quoted(tool: str) -> str:
    return json.dumps(tool, ensure_ascii=False)


class Fingerprinter:
    """Computes digests with one key under one policy. Stateless per call."""

    def __init__(self, key: DigestKey, policy: Policy):
        self.key = key
        self.policy = policy

    @property
    def key_id(self) -> str:
        return self.key.key_id

    def parse(self, value: Any) -> Parsed:
        return parse(value, max_bytes=self.policy.max_bytes)

    def action(
        self, tool: str, arguments: Any, identity: Optional[Mapping[str, Any]] = None
    ) -> Fingerprint:
        rule = self.policy.rule(tool)
        parsed = self._normalised(self.parse(arguments), rule)
        canon = serialise(parsed, max_depth=self.policy.max_depth)
        ident = self._identity(rule, identity or {})
        digest = self._digest("action", tool, canon, ident)
        return Fingerprint(digest, canon.flags, parsed.value)

    def result(self, tool: str, result: Any) -> Fingerprint:
        parsed = self.parse(result)
        drop = self.policy.volatile_for(tool)
        canon = serialise(parsed, drop_keys=drop, max_depth=self.policy.max_depth)
        # The tool is left out on purpose: equal outputs from any tool are "seen before".
        return Fingerprint(self._digest("result", "", canon, ""), canon.flags, parsed.value)

    def write(
        self, tool: str, arguments_value: Any, identity: Optional[Mapping[str, Any]] = None
    ) -> tuple[str, Optional[str]]:
        """(digest of the write without its idempotency key, digest of the key or None)."""
        rule = self.policy.rule(tool)
        field = rule.idempotency_key
        key_value = get_path(arguments_value, field) if field else None
        body = without_paths(arguments_value, (field,), match=False) if field else arguments_value
        canon = serialise(Parsed(body, "json", NO_FLAGS), max_depth=self.policy.max_depth)
        write = self._digest("write", tool, canon, self._identity(rule, identity or {}))
        if key_value is None:
            return write, None
        key_canon = serialise(Parsed(key_value, "json", NO_FLAGS))
        return write, self._digest("idempotency", tool, key_canon, "")

    def _normalised(self, parsed: Parsed, rule: ToolRule) -> Parsed:
        if not rule.ignore_fields and not rule.defaults:
            return parsed  # unchanged, so it keeps the source text that spares a walk
        if parsed.form != "json" or not isinstance(parsed.value, Mapping):
            return parsed
        value = parsed.value
        if rule.ignore_fields:
            value = without_paths(value, rule.ignore_fields, match=False)
        if rule.defaults:
            value = without_paths(value, rule.defaults, match=True)
        return Parsed(value, parsed.form, parsed.flags)

    def _identity(self, rule: ToolRule, identity: Mapping[str, Any]) -> str:
        if not rule.identity_fields or not identity:
            return ""  # the common case, without building an empty dict
        values = {k: identity[k] for k in rule.identity_fields if k in identity}
        if not values:
            return ""
        return serialise(Parsed(values, "json", NO_FLAGS)).text

    def _digest(self, domain: str, tool: str, canon: Canonical, identity: str) -> str:
        # NUL framing is unambiguous: every part but the last is JSON text or a
        # fixed word (no raw NUL), and the free-form canonical text comes last.
        tool_json = _quoted(tool)
        message = "\x00".join(("loopguard.v1", domain, tool_json, identity, canon.form, canon.text))
        return self.key.digest(message.encode("utf-8", errors="surrogatepass"))
