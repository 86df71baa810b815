"""Detectors: pure, incremental loop detection over one run's calls."""

from .base import Detector, Latch, Step
from .run import DETECTORS, OutOfOrderError, Run, RunSummary

__all__ = ["DETECTORS", "Detector", "Latch", "OutOfOrderError", "Run", "RunSummary", "Step"]
