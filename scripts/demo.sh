#!/usr/bin/env bash
# Set up a fresh machine (or reuse an up-to-date .venv) and run the main job: the loop audit demo.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
bash scripts/setup.sh
printf '[demo  %3ds] running the demo: %s/bin/otel-loopguard demo\n' "$SECONDS" "$venv"
exec "$venv/bin/otel-loopguard" demo "$@"
