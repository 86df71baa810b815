"""`otel-loopguard serve`: the flags, the OTLP service, and the server that builds and runs it.

Data flows: command.py turns flags into a config; server.py builds every part from it, each
complete when built, bottom first: restore.py feeds the new run assembler what a previous
process left in the state directory, service.py is the TraceService each request goes through
(ingest -> runs -> out), listen.py binds the two ports; running.py is the started receiver
(its timer, its graceful stop) and reload.py swaps its policy, certificates and tokens. With a
state directory the port comes first: takeover.py answers into the inbox until the directory
is this process's (a predecessor hands it over: state/handover.py), then replays the inbox
into the service. __main__.py runs the serve command alone (command.py re-executes into it).
"""
