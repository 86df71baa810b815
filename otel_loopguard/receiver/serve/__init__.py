"""`otel-loopguard serve`: the flags, the gRPC service, and the server that builds and runs it.

Data flows: command.py turns flags into a config; server.py builds every part from it
(complete, nothing wired afterwards) and runs it until a signal; service.py is the OTLP
TraceService each request goes through (ingest -> runs -> out); reload.py swaps the policy,
certificates and tokens of a running receiver.
"""
