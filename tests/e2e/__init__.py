"""End-to-end tests against real tracing backends (run as subprocesses on loopback)."""
