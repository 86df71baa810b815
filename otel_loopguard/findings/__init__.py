"""Findings: the detectors' verdicts, and (in shells) their encoding as spans."""

from .model import INFO, INTEGRITY_KINDS, KINDS, SEVERITY_RANK, STOP, WARN, Finding, finding, worst

__all__ = ["INFO", "INTEGRITY_KINDS", "KINDS", "SEVERITY_RANK", "STOP", "WARN", "Finding", "finding", "worst"]
