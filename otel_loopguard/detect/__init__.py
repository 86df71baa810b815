"""Detectors: pure, incremental loop detection over one run's calls."""

from .base import Detector, Latch, Step
from .run import DETECTORS, OutOfOrderError, Run

__all__ = ["DETECTORS", "Detector", "Latch", "OutOfOrderError", "Run", "Step"]
