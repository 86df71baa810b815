"""Conventions: which spans are tool calls and model calls, per instrumentation (pure)."""

from .recognise import ModelSpan, ToolSpan, is_tool_span, recognise

__all__ = ["ModelSpan", "ToolSpan", "is_tool_span", "recognise"]
