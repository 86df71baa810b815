"""Keyed fingerprints of actions, results and writes, under a policy.

An action is the tool name + its canonical arguments (after only the
normalisation the tool's policy declares) + declared identity values.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Mapping, NamedTuple, Optional

from ..canon import rust as native
from ..canon.canonical import NO_FLAGS, PROSE, Parsed, parse, serialise
from ..canon.fast import orjson_canonical, orjson_flat, parse_and_serialise
from ..canon.keys import DigestKey
from ..canon.volatile import Masker
from ..paths import get_path, without_paths
from ..calls import NO_EQUIVALENCE, Equivalence
from ..policy import Policy, ToolRule
from .equivalence import Keyed, of_call


_NO_KEYS: frozenset[str] = frozenset()
_MASKER = Masker()  # tools that declare no meaningful field share it
_JSON_NO_IDENTITY = b"\x00json\x00"  # what follows the prefix: no identity, the json form


class Fingerprint(NamedTuple):
    digest: str
    flags: frozenset[str]
    value: Any  # the parsed value after normalisation (opaque text for "text" form)


# Tool names come from telemetry: only names of ordinary length are cached, so that the
# caches below stay small whatever a sender puts there.
MAX_CACHED_TOOL_CHARS = 256


def _quoted(tool: str) -> str:
    return _quoted_cached(tool) if len(tool) <= MAX_CACHED_TOOL_CHARS else json.dumps(tool, ensure_ascii=False)


@lru_cache(maxsize=4096)
def _quoted_cached(tool: str) -> str:
    return json.dumps(tool, ensure_ascii=False)


# Digests of recent small payloads, per Fingerprinter: a looping agent sends the same
# arguments (and often gets the same result) again and again, and in enforce mode the
# guard digests each call's arguments before dispatch, then the processor again at its
# span's end. Memory stays bounded: at most MEMO_ENTRIES keys of MEMO_MAX_CHARS each.
MEMO_ENTRIES = 1024
MEMO_MAX_CHARS = 512


class Fingerprinter:
    """Computes digests with one key under one policy. The same input always gives the
    same digest; the only state is a bounded memo of recent ones (thread-safe: whole-dict
    reads and writes, and a full memo is replaced, never edited in place)."""

    def __init__(self, key: DigestKey, policy: Policy):
        self.key = key
        self.policy = policy
        self._actions: dict[tuple[str, str], tuple[str, frozenset[str]]] = {}
        # (digest, flags, exact digest or None): see result_digests
        self._results: dict[tuple[str, str], tuple[str, frozenset[str], Optional[str]]] = {}
        self._prefixes: dict[tuple[str, str], Any] = {}  # (domain, tool) -> prepared HMAC state
        self._native_prefixes: dict[tuple[str, str], Any] = {}  # the same, in the Rust module
        self._maskers: dict[tuple[str, ...], Masker] = {}  # meaningful fields -> their masker
        self._keyed: Optional[Keyed] = None  # item and sketch keys, derived on first use
        # (tool, arguments text, result text) -> Equivalence, for small payloads: a looping
        # agent sends the same call again and again (bounded as the digest memos are).
        self._equivalences: dict[tuple[int, str, str], Equivalence] = {}

    @property
    def key_id(self) -> str:
        return self.key.key_id

    def parse(self, value: Any) -> Parsed:
        return parse(value, max_bytes=self.policy.max_bytes)

    def action(
        self, tool: str, arguments: Any, identity: Optional[Mapping[str, Any]] = None
    ) -> Fingerprint:
        return Fingerprint(*self.action_parts(tool, self.policy.rule(tool), arguments, identity))

    def result(self, tool: str, result: Any) -> Fingerprint:
        return Fingerprint(*self.result_parts(tool, self.policy.rule(tool), result))

    # The two below are what `fingerprint_call` runs per call: the tool's rule looked up
    # once by the caller, plain tuples instead of records (the same values as above).
    def action_parts(
        self, tool: str, rule: ToolRule, arguments: Any, identity: Optional[Mapping[str, Any]] = None
    ) -> tuple[str, frozenset[str], Any]:
        """(digest, flags, normalised value) of an action."""
        policy = self.policy
        ident = self._identity(rule, identity) if identity else ""
        if rule.ignore_fields or rule.defaults:
            parsed = self._normalised(parse(arguments, max_bytes=policy.max_bytes), rule)
            canon = serialise(parsed, max_depth=policy.max_depth)
            return self._digest("action", tool, canon.form, canon.text, ident), canon.flags, parsed.value
        value, form, text, flags = parse_and_serialise(arguments, _NO_KEYS, policy.max_bytes, policy.max_depth)
        return self._digest("action", tool, form, text, ident), flags, value

    def action_digest(
        self, tool: str, rule: ToolRule, arguments: Any, identity: Optional[Mapping[str, Any]] = None
    ) -> tuple[str, frozenset[str]]:
        """(digest, flags) of an action, as `action_parts`, for callers that need no value.
        `rule` must be `self.policy.rule(tool)`: the memo is keyed by tool and text."""
        small = type(arguments) is str and len(arguments) <= MEMO_MAX_CHARS and len(tool) <= MAX_CACHED_TOOL_CHARS
        if small and not identity:
            key = (tool, arguments)
            memo = self._actions
            known = memo.get(key)
            if known is None:
                plain_rule = not (rule.ignore_fields or rule.defaults)
                known = self._native_action(tool, arguments, "") if plain_rule else None
                if known is None:
                    fast = orjson_canonical(
                        arguments, _NO_KEYS, self.policy.max_bytes, self.policy.max_depth) if plain_rule else None
                    if fast is not None:  # = action_parts(...)[:2], without decoding the text
                        known = (self._json_digest("action", tool, fast[1]), NO_FLAGS)
                    else:
                        known = self.action_parts(tool, rule, arguments)[:2]
                self._actions = _kept(memo, key, known)
            return known
        if not (rule.ignore_fields or rule.defaults):
            native_known = self._native_action(tool, arguments, self._identity(rule, identity) if identity else "")
            if native_known is not None:
                return native_known
        if not identity and not (rule.ignore_fields or rule.defaults):
            flat = orjson_flat(arguments, _NO_KEYS)  # parsed arguments (a dict): no memo, no walk
            if flat is not None:
                return self._json_digest("action", tool, flat), NO_FLAGS
        digest, flags, _ = self.action_parts(tool, rule, arguments, identity)
        return digest, flags

    def result_digest(self, tool: str, rule: ToolRule, result: Any) -> tuple[str, frozenset[str]]:
        """(digest, flags) of a result, as `result_parts`, for callers that need no value.
        `rule` must be `self.policy.rule(tool)`: the memo is keyed by tool and text."""
        return self.result_digests(tool, rule, result)[:2]

    def result_digests(self, tool: str, rule: ToolRule, result: Any) -> tuple[str, frozenset[str], Optional[str]]:
        """(digest, flags, exact digest) of a result: the digest has id- and time-shaped values
        masked (volatile.py); the exact one, without masking, is given only when it differs."""
        if type(result) is str and len(result) <= MEMO_MAX_CHARS and len(tool) <= MAX_CACHED_TOOL_CHARS:
            key = (tool, result)  # the tool decides which volatile fields are dropped
            memo = self._results
            known = memo.get(key)
            if known is None:
                policy = self.policy
                known = self._native_result(rule, result)
                if known is None:
                    fast = orjson_canonical(result, self._volatile(rule), policy.max_bytes, policy.max_depth)
                    if fast is not None:  # = result_full(...), without decoding the text
                        digest, exact = self._json_result(rule, fast[1])
                        known = (digest, NO_FLAGS, exact)
                    else:
                        digest, flags, _, exact = self.result_full(tool, rule, result)
                        known = (digest, flags, exact)
                self._results = _kept(memo, key, known)
            return known
        native_known = self._native_result(rule, result)
        if native_known is not None:
            return native_known
        flat = orjson_flat(result, self._volatile(rule))  # an unwrapped result (a dict)
        if flat is not None:
            digest, exact = self._json_result(rule, flat)
            return digest, NO_FLAGS, exact
        digest, flags, _, exact = self.result_full(tool, rule, result)
        return digest, flags, exact

    def result_parts(self, tool: str, rule: ToolRule, result: Any) -> tuple[str, frozenset[str], Any]:
        """(digest, flags, parsed value) of a result."""
        return self.result_full(tool, rule, result)[:3]

    def result_full(self, tool: str, rule: ToolRule, result: Any) -> tuple[str, frozenset[str], Any, Optional[str]]:
        """(digest, flags, parsed value, exact digest or None): `result_digests` plus the value."""
        policy = self.policy
        value, form, text, flags = parse_and_serialise(result, self._volatile(rule), policy.max_bytes, policy.max_depth)
        # The tool is left out on purpose: equal outputs from any tool are "seen before".
        exact = self._digest("result", "", form, text, "")
        masker = self._masker(rule) if form == "json" else None
        masked = masker.text(text) if masker is not None else None
        if masked is None:
            return exact, flags, value, None
        return self._digest("result", "", form, masked, ""), flags, value, exact

    def _json_result(self, rule: ToolRule, canonical: bytes) -> tuple[str, Optional[str]]:
        """(digest, exact digest or None) of canonical JSON in UTF-8, as `result_full`."""
        exact = self._json_digest("result", "", canonical)
        masker = self._masker(rule)
        masked = masker.data(canonical) if masker is not None else None
        if masked is None:
            return exact, None
        return self._json_digest("result", "", masked), exact

    def _native_action(self, tool: str, arguments: Any, identity: str) -> Optional[tuple[str, frozenset[str]]]:
        """(digest, flags) of text arguments through the Rust module (canon/rust.py),
        equal to `action_parts`; None when it is absent or the input is not text."""
        prefix = self._native_prefix("action", tool)
        if prefix is None:
            return None
        policy = self.policy
        return native.digest_text(prefix, arguments, identity, _NO_KEYS, policy.max_bytes, policy.max_depth)

    def _native_result(self, rule: ToolRule, result: Any) -> Optional[tuple[str, frozenset[str], Optional[str]]]:
        """`result_digests` of a text result through the Rust module, or None (see above)."""
        prefix = self._native_prefix("result", "")
        if prefix is None:
            return None
        policy = self.policy
        got = native.canonical(result, self._volatile(rule), policy.max_bytes, policy.max_depth)
        if got is None:
            return None
        form, text, flags = got
        exact = native.digest_form(prefix, form, text)
        masker = self._masker(rule) if form == "json" else None
        masked = masker.data(text) if masker is not None else None
        if masked is None:
            return exact, flags, None
        return native.digest_form(prefix, form, masked), flags, exact

    def _native_prefix(self, domain: str, tool: str) -> Any:
        """`_prefix` in the Rust module; None without it."""
        if not native.AVAILABLE:
            return None
        prefix = self._native_prefixes.get((domain, tool))
        if prefix is None:
            head = f"loopguard.v1\x00{domain}\x00{_quoted(tool)}\x00"
            prefix = self.key.native_prefixed(head.encode("utf-8", "surrogatepass"))
            if prefix is None or len(tool) > MAX_CACHED_TOOL_CHARS:
                return prefix
            if len(self._native_prefixes) >= MEMO_ENTRIES:
                self._native_prefixes = {}
            self._native_prefixes[(domain, tool)] = prefix
        return prefix

    def _masker(self, rule: ToolRule) -> Optional[Masker]:
        """The tool's masker of volatile-shaped values, or None when its policy turns it off."""
        on = self.policy.volatile_values if rule.volatile_values is None else rule.volatile_values
        if not on:
            return None
        keep = rule.meaningful_fields
        if not keep:
            return _MASKER
        masker = self._maskers.get(keep)
        if masker is None:
            masker = self._maskers[keep] = Masker(keep)  # one per distinct list: policy-bounded
        return masker

    def _volatile(self, rule: ToolRule) -> frozenset[str]:
        """Policy.volatile_for, from the rule the caller already looked up."""
        own = rule.result_volatile_fields
        return self.policy.result_volatile_fields if own is None else own

    def write(
        self, tool: str, arguments_value: Any, identity: Optional[Mapping[str, Any]] = None
    ) -> tuple[str, Optional[str]]:
        """(digest of the write without its idempotency key, digest of the key or None)."""
        rule = self.policy.rule(tool)
        field = rule.idempotency_key
        key_value = get_path(arguments_value, field) if field else None
        body = without_paths(arguments_value, (field,), match=False) if field else arguments_value
        canon = serialise(Parsed(value=body, form="json", flags=NO_FLAGS), max_depth=self.policy.max_depth)
        write = self._digest("write", tool, canon.form, canon.text, self._identity(rule, identity or {}))
        if key_value is None:
            return write, None
        key_canon = serialise(Parsed(value=key_value, form="json", flags=NO_FLAGS))
        return write, self._digest("idempotency", tool, key_canon.form, key_canon.text, "")

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
        return Parsed(value=value, form=parsed.form, flags=parsed.flags)

    def _identity(self, rule: ToolRule, identity: Mapping[str, Any]) -> str:
        if not rule.identity_fields or not identity:
            return ""  # the common case, without building an empty dict
        values = {k: identity[k] for k in rule.identity_fields if k in identity}
        if not values:
            return ""
        return serialise(Parsed(value=values, form="json", flags=NO_FLAGS)).text

    def _digest(self, domain: str, tool: str, form: str, text: str, identity: str) -> str:
        # The message is "loopguard.v1", domain, quoted tool, identity, form, text joined by
        # NUL. NUL framing is unambiguous: every part but the last is JSON text or a fixed
        # word (no raw NUL), and the free-form canonical text comes last. Its first three
        # parts are hashed once per (domain, tool): the key's state after them is kept.
        rest = f"{identity}\x00{form}\x00{text}".encode("utf-8", errors="surrogatepass")
        return self.key.digest_after(self._prefix(domain, tool), rest)

    def _json_digest(self, domain: str, tool: str, canonical: bytes) -> str:
        """`_digest` of canonical JSON already in UTF-8, with no identity (the native paths)."""
        return self.key.digest_after(self._prefix(domain, tool), _JSON_NO_IDENTITY + canonical)

    # -- equivalence (docs/equivalence.md): fingerprint/equivalence.py, with this key and policy --
    @property
    def keyed(self) -> Keyed:
        keyed = self._keyed
        if keyed is None:
            keyed = self._keyed = Keyed(self.key)
        return keyed

    def equivalence(self, rule: ToolRule, arguments: Any, args_value: Any, result: Any, finished: bool,
                    identity: Optional[Mapping[str, Any]] = None) -> Equivalence:
        """Shape digest, item hashes, argument sketch and reported failure of one call."""
        eq = self.policy.equivalence_for(rule)
        if eq.exempt:
            return NO_EQUIVALENCE
        small = (finished and not identity and type(arguments) is str and type(result) is str
                 and len(arguments) <= MEMO_MAX_CHARS and len(result) <= MEMO_MAX_CHARS)
        if not small:
            ident = self._identity(rule, identity) if identity else ""
            return of_call(self, rule, eq, arguments, args_value, result, finished, ident)
        # Keyed by the rule, not the tool: equivalence depends on the tool only through its rule
        # (the policy's, alive as long as this Fingerprinter), and tools without one share it.
        key = (id(rule), arguments, result)
        memo = self._equivalences
        known = memo.get(key)
        if known is None:
            known = of_call(self, rule, eq, arguments, args_value, result, finished)
            if len(memo) >= MEMO_ENTRIES:
                memo = self._equivalences = {}  # replaced whole, never edited in place (see the class)
            memo[key] = known
        return known

    def volatile(self, rule: ToolRule) -> frozenset[str]:
        return self._volatile(rule)

    def masker(self, rule: ToolRule) -> Optional[Masker]:
        return self._masker(rule)

    def digest_form(self, domain: str, tool: str, form: str, text: str) -> str:
        """A keyed digest of canonical text in `form`, without identity."""
        return self._digest(domain, tool, form, text, "")

    def forget_memo(self) -> None:
        """Start the digest memos over (a receiver after a burst): replaced whole, as when full."""
        self._actions, self._results, self._equivalences = {}, {}, {}

    def _prefix(self, domain: str, tool: str) -> Any:
        prefix = self._prefixes.get((domain, tool))
        if prefix is None:
            head = f"loopguard.v1\x00{domain}\x00{_quoted(tool)}\x00"
            prefix = self.key.prefixed(head.encode("utf-8", "surrogatepass"))
            if len(tool) > MAX_CACHED_TOOL_CHARS:
                return prefix
            if len(self._prefixes) >= MEMO_ENTRIES:
                self._prefixes = {}  # bounded, like the memo (tool names come from telemetry)
            self._prefixes[(domain, tool)] = prefix
        return prefix


def _kept(memo: dict[Any, Any], key: Any, known: tuple[Any, ...]) -> dict[Any, Any]:
    """The memo, holding `known` unless it is flagged (odd input, or a caller short of
    stack: not to be served again) other than as prose; a full memo starts over as a new
    dict (see the class)."""
    if not known[1] or known[1] is PROSE:
        if len(memo) >= MEMO_ENTRIES:
            memo = {}
        memo[key] = known
    return memo
