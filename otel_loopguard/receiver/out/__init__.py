"""Spans on their way downstream.

Data flows: downstream.py sends OTLP bytes with retries; delivery.py is inline mode's forward
queue in front of it; finding_queue.py holds the finding and run spans until delivered, never
ahead of the spans they are about; phoenix.py (given Phoenix's URL) also records each loop's
verdict in Phoenix's annotations.
"""
