"""Spans on their way downstream.

Data flows: downstream.py sends OTLP bytes with retries; delivery.py is inline mode's forward
queue in front of it; finding_queue.py holds the finding and run spans until delivered, never
ahead of the spans they are about; phoenix.py (opt-in) also records stop findings as Phoenix
trace annotations.
"""
