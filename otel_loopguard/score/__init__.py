"""Scoring: trace integrity, the per-run score fields, and the release rule (pure)."""

from .integrity import INCOMPLETE, INTEGRITY_ERROR, SCORED, Integrity, check
from .release import release_violations
from .scoring import (GuardTrail, Prepared, RunInput, RunReport, feed_in_order, judge, judge_prepared, next_seq_after,
                      prepare, score_fields)

__all__ = [
    "INCOMPLETE",
    "INTEGRITY_ERROR",
    "GuardTrail",
    "SCORED",
    "Integrity",
    "Prepared",
    "RunInput",
    "RunReport",
    "check",
    "feed_in_order",
    "judge",
    "judge_prepared",
    "next_seq_after",
    "prepare",
    "release_violations",
    "score_fields",
]
