#!/usr/bin/env bash
# Set up a fresh machine (or reuse up-to-date virtualenvs) and run the whole test suite, saying
# what it does at each step; extra arguments go to pytest.
#
#   bash scripts/test.sh            the whole suite, as CI runs it (builds what the real-process tests need)
#   bash scripts/test.sh --fast     the fast tier: every test that starts no real process, server or
#                                   browser (tests/conftest.py), on two workers, with no build but the venv
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[test  %3ds] %s\n' "$SECONDS" "$*"; }
if [ "${1:-}" = "--fast" ]; then
  shift
  say "fast tier: the test virtualenv .venv, then every test not marked real (tests/conftest.py)"
  bash scripts/setup.sh test,frameworks,phoenix,mcp
  LOOPGUARD_FAST=1 exec .venv/bin/python -m pytest -q -n 2 -m "not real" "$@"
fi
say "step 1/7: the test virtualenv .venv (test, frameworks, Phoenix, MCP)"
bash scripts/setup.sh test,frameworks,phoenix,mcp
# Virtualenvs for what cannot share the first (see pyproject): the OTel-contrib GenAI
# instrumentation; Pydantic AI, CrewAI, smolagents and LlamaIndex (one); Google ADK, whose
# opentelemetry pin the others do not allow (tests/frameworks/test_framework_runs.py). They
# install in the background while steps 3-6 build, each line led by the virtualenv's name;
# step 7 waits for them.
say "step 2/7: the framework virtualenvs .venv-genai, .venv-fw (Pydantic AI, CrewAI, smolagents, LlamaIndex), .venv-adk (Google ADK), in the background"
bg_dir=$(mktemp -d)
bg_pids=()
trap 'for pid in "${bg_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$bg_dir"' EXIT
in_background() {  # VENV EXTRAS
  ( VENV="$1" bash scripts/setup.sh "$2" 2>&1; echo $? > "$bg_dir/$1" ) | sed -u "s/^/[$1] /" &
  bg_pids+=("$!")
}
in_background .venv-genai genai_contrib
in_background .venv-fw frameworks_more
in_background .venv-adk adk
# The real OpenTelemetry Collector for tests/collector/ (built once per manifest, then reused).
say "step 3/7: the OpenTelemetry Collector for tests/collector/"
if command -v go >/dev/null 2>&1; then
  say "Collector ready: $(bash scripts/otelcol.sh)"
else
  echo "test.sh: 'go' not found: the Collector tests will skip (on CI they fail); apt-get install golang-go" >&2
fi
# The real Jaeger for tests/e2e/test_jaeger.py (built once from the Go module proxy, then reused).
say "step 4/7: Jaeger (all-in-one) for tests/e2e/test_jaeger.py"
if command -v go >/dev/null 2>&1; then
  say "Jaeger ready: $(bash scripts/jaeger.sh)"
else
  echo "test.sh: 'go' not found: the Jaeger test will skip (on CI it fails); apt-get install golang-go" >&2
fi
# A real browser for the HTML report tests (tests/calibrate/test_html_browser.py) and for
# Phoenix's UI at 1400x900 (tests/e2e/test_phoenix_ui.py, driven over the DevTools protocol;
# its screenshots land in test-artifacts/phoenix/): Debian's chromium package. Missing, the
# tests skip on a workstation and fail on CI (CI is set).
say "step 5/7: Chromium for the HTML report tests and Phoenix's UI"
if command -v chromium >/dev/null 2>&1; then
  say "Chromium ready: $(command -v chromium)"
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  say "chromium not found: installing Debian's chromium package with apt-get (a few minutes, once)"
  DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
  say "Chromium ready: $(command -v chromium)"
elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then
  say "chromium not found: installing Debian's chromium package with sudo apt-get (a few minutes, once)"
  sudo DEBIAN_FRONTEND=noninteractive apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
  say "Chromium ready: $(command -v chromium)"
else
  echo "test.sh: 'chromium' not found and no apt-get to install it: the browser test will skip (on CI it fails)" >&2
fi
# A real Prometheus for the alert tests (tests/alerts/: promtool checks and unit-tests
# alerts/otel-loopguard.rules.yaml; a prometheus server scrapes a real receiver): Debian's
# prometheus package, which ships both. Where it cannot be installed the alert tests skip on a
# workstation, and this script stops on CI (CI=true). On a machine run by systemd the package
# also starts its own service on :9090; the tests run theirs on a free loopback port.
say "step 6/7: Prometheus and promtool for tests/alerts/"
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  say "Prometheus ready: $(prometheus --version 2>&1 | head -n 1)"
else
  prometheus_missing=""
  as_root=""
  [ "$(id -u)" = 0 ] || as_root="sudo"
  if command -v apt-get >/dev/null 2>&1 && { [ -z "$as_root" ] || command -v sudo >/dev/null 2>&1; }; then
    say "prometheus not found: installing Debian's prometheus package (with promtool) with ${as_root:+sudo }apt-get (a minute, once)"
    if $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q \
        && $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus \
        && command -v promtool >/dev/null 2>&1; then
      say "Prometheus ready: $(prometheus --version 2>&1 | head -n 1)"
    else
      prometheus_missing="apt-get could not install Debian's prometheus package"
    fi
  else
    prometheus_missing="'prometheus' not found and no apt-get to install it"
  fi
  if [ -n "$prometheus_missing" ] && [ "${CI:-}" = true ]; then
    echo "test.sh: $prometheus_missing: the alert tests (tests/alerts/) need it on CI; stopping" >&2
    exit 1
  elif [ -n "$prometheus_missing" ]; then
    echo "test.sh: $prometheus_missing: the alert tests (tests/alerts/) will skip (on CI they fail)" >&2
  fi
fi
# The fingerprint path the suite runs on (setup.sh built the Rust module if cargo is present;
# OTEL_LOOPGUARD_PURE_PYTHON=1 runs it on the Python path).
say "fingerprint path: $(.venv/bin/python -c 'from otel_loopguard import native; print(native.PATH)')"
# The framework virtualenvs of step 2, which tests/frameworks/ needs.
say "waiting for the framework virtualenvs of step 2"
wait "${bg_pids[@]}"
bg_pids=()
for venv in .venv-genai .venv-fw .venv-adk; do
  [ "$(cat "$bg_dir/$venv" 2>/dev/null)" = 0 ] || { say "setting up $venv failed (its lines above)"; exit 2; }
done
say "framework virtualenvs ready"
# Each test's name as it runs; while a long one runs (the end-to-end tests run real servers for
# up to a minute), a line every 8 s names it (scripts/talk.sh). The tests that start nothing real
# run on two workers; those marked real (tests/conftest.py) one at a time, as their timing
# under load asks. One exit status for all: the first failure's (5, nothing selected, is none).
talk() { TALK_SINCE=$(( $(date +%s) - SECONDS )) bash scripts/talk.sh test "running"; }
status=0
worse() { if [ "$1" -ne 0 ] && [ "$1" -ne 5 ] && [ "$status" -eq 0 ]; then status=$1; fi; }
set +e
say "step 7/7: the test suite: the tests that start nothing real on two workers (pytest -v -n 2 -m 'not real')"
.venv/bin/python -m pytest -v -n 2 -m "not real" "$@" 2>&1 | talk
part=${PIPESTATUS[0]}; worse "$part"
say "pytest (not real, two workers) exit status $part"
say "step 7/7: the tests that start real processes, servers and browsers, one at a time (pytest -v -m real)"
.venv/bin/python -m pytest -v -m real "$@" 2>&1 | talk
part=${PIPESTATUS[0]}; worse "$part"
say "pytest (real) exit status $part"
say "pytest exit status $status"
# With the Rust module in use, the suite above ran the native fingerprint path: the Python
# path, the reference, runs the suite again, all of it but the folders of real processes
# (Collector, Jaeger, Phoenix, framework agents, restarts), which judge with the same code the
# in-process tests run; the same split as above.
if [ "$(.venv/bin/python -c 'from otel_loopguard import native; print(native.AVAILABLE)')" = True ]; then
  say "the suite again on the Python path (OTEL_LOOPGUARD_PURE_PYTHON=1), without the real-process folders"
  skip=(--ignore=tests/collector --ignore=tests/reliability --ignore=tests/e2e --ignore=tests/frameworks
        --ignore=tests/mcp --ignore=tests/test_setup_scripts.py --ignore=tests/test_ci_docs.py)
  OTEL_LOOPGUARD_PURE_PYTHON=1 .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 -m "not real" "$@" "${skip[@]}"
  pure=$?
  OTEL_LOOPGUARD_PURE_PYTHON=1 .venv/bin/python -m pytest -q -p no:cacheprovider -m real "$@" "${skip[@]}"
  part=$?
  [ "$pure" -ne 0 ] && [ "$pure" -ne 5 ] || pure=$part
  say "pytest (Python path) exit status $pure"
  worse "$pure"
fi
exit "$status"
