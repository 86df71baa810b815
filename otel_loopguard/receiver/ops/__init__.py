"""The receiver process's own concerns, beside the pipeline: its metrics (metrics.py), the
memory bound every growing structure counts toward (budget.py), when full garbage collections
run (pauses.py), giving memory back after a burst (trim.py), and who may talk to it
(security.py). Each stage reads these; none of them reads a stage.
"""
