"""The receiver's front door: what a sender talks to.

- service.py: the OTLP/gRPC TraceService: claim, dedupe, forward, then judge, or ask the sender
  to retry;
- listen.py: the OTLP/gRPC port (health, bearer check) and the metrics port, each bound before
  startup goes on;
- takeover.py: while a predecessor hands the state directory over, requests are answered by
  writing them to this process's inbox (docs/reliability.md, "Restarts without a gap").
"""
