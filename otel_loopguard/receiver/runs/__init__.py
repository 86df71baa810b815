"""Span facts become runs, and runs become findings.

Data flows: assembly.py routes each decoded span to its open run, runs the timers and completes
runs; buffer.py holds one run's calls in sequence order and feeds the detectors; late.py keeps
completed runs' inputs so that calls arriving after the judgement are judged with them again;
restart.py says which runs a receiver restart cut in two.
"""
