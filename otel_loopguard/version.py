"""The package version, in a leaf module: the core (findings/otlp.py stamps it on the
instrumentation scope) imports it without importing the package root and what it pulls in.
Kept equal to pyproject.toml's `version` by tests/test_layering.py."""

__version__ = "0.1.0"
