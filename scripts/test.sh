#!/usr/bin/env bash
# Set up a fresh machine and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test,frameworks,phoenix
# A second virtualenv for the one instrumentation that cannot share the first (see pyproject).
VENV=.venv-genai bash scripts/setup.sh genai_contrib
exec .venv/bin/python -m pytest "$@"
