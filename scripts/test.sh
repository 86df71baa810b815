#!/usr/bin/env bash
# Set up a fresh machine and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test,frameworks,phoenix
# A second virtualenv for the one instrumentation that cannot share the first (see pyproject).
VENV=.venv-genai bash scripts/setup.sh genai_contrib
# The real OpenTelemetry Collector for tests/collector/ (built once per manifest, then reused).
if command -v go >/dev/null 2>&1; then
  bash scripts/otelcol.sh > /dev/null
else
  echo "test.sh: 'go' not found: the Collector tests will skip (on CI they fail); apt-get install golang-go" >&2
fi
exec .venv/bin/python -m pytest "$@"
