#!/usr/bin/env bash
# Set up a fresh machine and run the main job: the loop audit demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/otel-loopguard demo "$@"
