"""A call's equivalence sketches from its payloads (docs/equivalence.md): the shape digest,
the keyed item hashes, the argument sketch, echoes and a failure the result reports.

Everything here is keyed with keys derived from the digest key (HMAC of a fixed label), so
item hashes and sketches are comparable within one key id and nowhere else, like digests.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any, Optional

from ..calls import Equivalence
from ..canon.canonical import parse
from ..canon.fast import parse_and_serialise
from ..canon.keys import DigestKey
from ..canon.shape import ids, noise_parts, shape_changed
from ..canon.sketch import RESULT_SLOTS, sketch, tokens
from ..conventions.failures import failure
from ..conventions.shell import is_noop
from ..paths import get_path
from ..policy import EquivalenceRule
from .items import NO_ECHO, Echo, decompose

ITEM_CAP = 32  # item hashes kept per result (and sent on the span): docs/equivalence.md
# A text result this long or longer gets a similarity sketch (a shorter one is judged on its
# items and shape alone: a few words are too few to estimate a similarity from).
MIN_SKETCH_CHARS = 80
MIN_SKETCH_TOKENS = 12
# Only the head of a long answer is sketched, and at most this many of its distinct words: an
# answer re-worded by its sender (a refusal, a summary) shows it there, and the cost of a long
# read stays bounded (its items judge it).
MAX_SKETCH_CHARS = 1024
MAX_SKETCH_TOKENS = 64
ITEM_BITS = 64
MAX_ZEROS = 31  # sampling levels above are never needed (2^31 items)
_TOP = 1 << (ITEM_BITS - 1)


def derived_key(key: DigestKey, label: str) -> bytes:
    """A 16-byte key for one use, one-way from the digest key."""
    return bytes.fromhex(key.digest(f"loopguard.v1\x00derived\x00{label}".encode()))


class Keyed:
    """Keyed 64-bit hashes for items and sketch tokens (BLAKE2b in keyed mode)."""

    __slots__ = ("_items", "_tokens", "_results")

    def __init__(self, key: DigestKey):
        self._items = hashlib.blake2b(key=derived_key(key, "item"), digest_size=8)
        self._tokens = hashlib.blake2b(key=derived_key(key, "sketch"), digest_size=8)
        self._results = hashlib.blake2b(key=derived_key(key, "result-sketch"), digest_size=8)

    def item(self, data: bytes, zeros: int) -> int:
        """The item's keyed 64-bit hash with exactly `zeros` leading zero bits (its sampling
        level, see `hashed_items`): the rest of its bits are keyed."""
        h = self._items.copy()
        h.update(data)
        return (int.from_bytes(h.digest(), "big") | _TOP) >> zeros

    def token(self, text: str) -> int:
        h = self._tokens.copy()
        h.update(text.encode("utf-8", "surrogatepass"))
        return int.from_bytes(h.digest(), "big")

    def result_token(self, text: str) -> int:
        """A result's tokens under a key of their own: a result sketch is never comparable
        with an argument sketch."""
        h = self._results.copy()
        h.update(text.encode("utf-8", "surrogatepass"))
        return int.from_bytes(h.digest(), "big")


def sampling_zeros(data: bytes) -> int:
    """An item's sampling level: the leading zero bits of its CRC-32, at most MAX_ZEROS.

    Unkeyed, so that only the items kept need a keyed hash (one BLAKE2b each, the cost of a
    long answer): what it tells of an item is its level, about one bit, and the level is
    already what an item's place in the sample says (docs/security.md)."""
    return min(MAX_ZEROS, 32 - zlib.crc32(data).bit_length())


def sample_level(zeros: list[int]) -> int:
    """The smallest level that keeps at most ITEM_CAP of items with these sampling zeros:
    every item with at least `level` zeros is kept. The same items always keep the same
    sample, and a subset's sample at the whole's level is a subset of the whole's."""
    if len(zeros) <= ITEM_CAP:
        return 0
    return sorted(zeros, reverse=True)[ITEM_CAP] + 1  # one more than the (cap+1)-th most


def hashed_items(texts: list[str], keyed: Keyed) -> tuple[bytes, int, int]:
    """(kept item hashes, 8 bytes each in ascending order; distinct items; level)."""
    zeros = {data: sampling_zeros(data) for data in {t.encode("utf-8", "surrogatepass") for t in texts}}
    level = sample_level(list(zeros.values()))
    kept = sorted(keyed.item(data, z) for data, z in zeros.items() if z >= level)
    return b"".join(h.to_bytes(8, "big") for h in kept), len(zeros), level


def argument_value(arguments: Any, max_bytes: int) -> Any:
    return parse(arguments, max_bytes=max_bytes).value


def of_call(fp: Any, rule: Any, eq: EquivalenceRule, arguments: Any, args_value: Any, result: Any,
            finished: bool, identity: str = "") -> Equivalence:
    """The Equivalence of one call under `eq` (fp: the Fingerprinter, for its digests)."""
    policy = fp.policy
    if args_value is None and arguments is not None:
        args_value = argument_value(arguments, policy.max_bytes)
    keyed = fp.keyed
    sk = None
    # The switches `shape`, `items`, `echo` and `similarity` are read where calls are judged
    # (progress/, detect/), so every sketch is computed here whatever they say: calibrate can
    # then sweep them over one fingerprint pass. Only `exempt` computes nothing.
    if args_value is not None:
        source = _fields(args_value, eq.sketch_fields) if eq.sketch_fields else args_value
        words = tokens(source)
        # Declared identity (a tenant) keeps actions apart: it salts every token, so two
        # tenants' alike requests get unrelated sketches.
        sk = sketch(words if not identity else {f"{identity}\x00{w}" for w in words}, keyed.token)
    noop = args_value is not None and is_noop(args_value)
    if not finished:
        return Equivalence(sketch=sk, noop=noop)
    if result is None:  # no output recorded: an empty answer
        return Equivalence(item_count=0, sketch=sk, noop=noop)
    value, form, text, _ = parse_and_serialise(result, fp.volatile(rule), policy.max_bytes, policy.max_depth)
    # A text answer is put in noise form once, for its shape and for its lines.
    head, tail = noise_parts(text) if form == "text" else ("", "")
    noised = head + tail if form == "text" else None
    shape = _shape_digest(fp, rule, eq, form, text, noised)
    failed = failure(value, form, eq.failure_fields, eq.failure_text) if (eq.failure_fields or eq.failure_text) else None
    echo = Echo(args_value) if args_value is not None else NO_ECHO
    found = decompose(value, form, eq, echo, head if form == "text" and not eq.items_path else None)
    items, count, level = hashed_items(found.texts, keyed)
    rsk = _result_sketch(noised, keyed) if noised is not None and len(text) >= MIN_SKETCH_CHARS else None
    return Equivalence(shape=shape, items=items, item_count=count, level=level, empty_list=found.empty_list,
                       echoed=found.echoed, sketch=sk, failed=failed, noop=noop, result_sketch=rsk)


def _result_sketch(noised: str, keyed: Keyed) -> Optional[bytes]:
    """The sketch of a text result's words in noise form (durations, counts and ids masked),
    from its head."""
    words = tokens(noised[:MAX_SKETCH_CHARS], MAX_SKETCH_TOKENS)
    return sketch(words, keyed.result_token, RESULT_SLOTS) if len(words) >= MIN_SKETCH_TOKENS else None


def _shape_digest(fp: Any, rule: Any, eq: EquivalenceRule, form: str, text: str,
                  noised: Optional[str]) -> Optional[str]:
    """The result's digest in shape form, or None when shape masking changes nothing (or is
    off: by the policy, or for a tool whose ids are meaningful)."""
    masker = fp.masker(rule)
    if rule.meaningful_fields or masker is None:
        return None  # the tool's ids and times are (part of) the answer
    shaped: Optional[str]
    if noised is not None:  # text: noise already masked
        shaped = ids(noised)
        shaped = None if shaped == text else shaped
    else:
        shaped = shape_changed(masker.text(text) or text)
    return None if shaped is None else fp.digest_form("result", "", form, shaped)


def _fields(value: Any, paths: tuple[str, ...]) -> list[Any]:
    return [get_path(value, p) for p in paths]
