"""Receiver: the downstream OTLP/gRPC service (`otel-loopguard serve`).

decode -> dedupe -> forward -> assemble runs in sequence order -> detect ->
emit finding spans. A thin shell around the same core the audit uses.

Rooms, bottom first (a room imports only from the rooms below it; tests/test_layering.py):
- config.py: the settings every room reads;
- ops/: the process's own concerns (metrics, the memory bound, collections, trims, auth);
- ingest/: a request's bytes -> span facts, each new or a duplicate;
- runs/: span facts -> open runs in sequence order -> findings;
- state/: what a restart must not forget (the state directory);
- out/: finding spans and forwarded requests on their way downstream;
- front/: the front door: the OTLP TraceService, its ports, the takeover inbox;
- serve/: the flags and the server that builds and runs it all.
"""
