"""Calibrate: replay recorded runs under candidate policies, per tool, in one pass.

`sweep.py` candidate policies, `replay.py` what blocking would do in one run, `calibration.py`
all candidates over all runs (pure); `report.py` text and JSON, `html.py` the HTML report,
`command.py` the command.
"""

from .calibration import Calibration, calibrate
from .sweep import Candidate, candidates, parse_sweep

__all__ = ["Calibration", "Candidate", "calibrate", "candidates", "parse_sweep"]
