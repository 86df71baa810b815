#!/usr/bin/env bash
# Create a virtualenv (.venv, or $VENV) if missing and install otel-loopguard with the given extras.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
extras="${1:-}"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
if [ -n "$extras" ]; then
  "$venv/bin/python" -m pip install --quiet -e ".[$extras]"
else
  "$venv/bin/python" -m pip install --quiet -e .
fi
