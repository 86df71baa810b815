"""Progress: what counts as new information for a tool (pure)."""

from .evidence import extract
from .tracker import Judgement, ProgressTracker, seen_equivalence

__all__ = ["Judgement", "ProgressTracker", "extract", "seen_equivalence"]
