"""Receiver: the downstream OTLP/gRPC service (`otel-loopguard serve`).

decode -> dedupe -> forward -> assemble runs in sequence order -> detect ->
emit finding spans. A thin shell around the same core the audit uses.
"""
