"""`otel-loopguard serve`: the flags and the server that builds and runs it all.

Data flows: command.py turns flags into a config; server.py builds every part from it, each
complete when built, bottom first: restore.py feeds the new run assembler what a previous
process left in the state directory, the front door (front/: the TraceService each request goes
through, the two ports) is bound; running.py is the started receiver (its timer, its graceful
stop) and reload.py swaps its policy, certificates and tokens. With a state directory the port
comes first: front/takeover.py answers into the inbox until the directory is this process's (a
predecessor hands it over: state/handover.py), then replays the inbox into the service.
__main__.py runs the serve command alone (command.py re-executes into it).
"""
