"""Scoring: trace integrity, the per-run score fields, and the release rule (pure)."""

from .integrity import INCOMPLETE, INTEGRITY_ERROR, SCORED, Integrity, check
from .release import release_violations
from .scoring import GuardTrail, RunInput, RunReport, feed_in_order, judge, next_seq_after, score_fields

__all__ = [
    "INCOMPLETE",
    "INTEGRITY_ERROR",
    "GuardTrail",
    "SCORED",
    "Integrity",
    "RunInput",
    "RunReport",
    "check",
    "feed_in_order",
    "judge",
    "next_seq_after",
    "release_violations",
    "score_fields",
]
