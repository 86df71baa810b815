"""One exception type per layer, each with a message a user can act on."""

from __future__ import annotations


class LoopguardError(Exception):
    """Base class of every error otel-loopguard raises on purpose."""


class PolicyError(LoopguardError):
    """A policy file or mapping is invalid; the message names the bad key."""


class KeyConfigError(LoopguardError):
    """The digest key configuration is unusable. Never carries the key itself."""


class InputError(LoopguardError):
    """An audit input (file, record) is malformed; the message names file and line."""
