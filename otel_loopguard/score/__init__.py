"""Scoring: trace integrity, the per-run score fields, and the release rule (pure)."""

from .integrity import INCOMPLETE, INTEGRITY_ERROR, SCORED, Integrity, check
from .release import release_violations
from .scoring import RunInput, RunReport, judge, score_fields

__all__ = [
    "INCOMPLETE",
    "INTEGRITY_ERROR",
    "SCORED",
    "Integrity",
    "RunInput",
    "RunReport",
    "check",
    "judge",
    "release_violations",
    "score_fields",
]
