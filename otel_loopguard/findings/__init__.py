"""Findings: the detectors' verdicts, and (in shells) their encoding as spans."""

from .model import AT_NEXT_CALL_KINDS, INFO, INTEGRITY_KINDS, KINDS, SEVERITY_RANK, STOP, TOOL_LEVEL_KINDS, WARN, Finding, finding, worst

__all__ = ["AT_NEXT_CALL_KINDS", "INFO", "INTEGRITY_KINDS", "KINDS", "SEVERITY_RANK", "STOP", "TOOL_LEVEL_KINDS", "WARN", "Finding", "finding", "worst"]
