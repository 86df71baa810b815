"""Conventions: which spans are tool calls and model calls, per instrumentation (pure)."""

from .recognise import ModelSpan, ToolSpan, recognise

__all__ = ["ModelSpan", "ToolSpan", "recognise"]
