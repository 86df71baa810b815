"""Audit: score recorded traces (NDJSON, OTLP/JSON, OTLP protobuf) for QA and CI."""

from .command import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, EXIT_UNSCORABLE, audit, exit_status
from .inputs import read_runs

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAIL", "EXIT_PASS", "EXIT_UNSCORABLE", "audit", "exit_status", "read_runs"]
