#!/usr/bin/env bash
# Build the optional Rust module (native/: the canonical form and keyed digest of JSON payloads,
# and the receiver's decode of OTLP requests)
# into the virtualenv when cargo is present; without cargo, say that the Python path is used.
# The package works the same either way (otel_loopguard/native.py picks the path).
#
#   bash scripts/native.sh            build (or reuse) the wheel and install it into $VENV (.venv)
#   bash scripts/native.sh --status   one line when nothing is to do (exit 0), else exit 1
#
# The wheel is kept outside the checkout, keyed by the crate's sources and the Rust version
# (like scripts/otelcol.sh keeps the Collector): ${OTEL_LOOPGUARD_CACHE:-~/.cache/otel-loopguard}/
# native/<key>/. cargo's build folder is kept there too. OTEL_LOOPGUARD_NATIVE=0 skips the module;
# NATIVE_JOBS sets cargo's jobs (default 1: the machines running this are shared).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
cache="${OTEL_LOOPGUARD_CACHE:-$HOME/.cache/otel-loopguard}/native"
stamp="$venv/.otel-loopguard-native"
say() { printf '[native %3ds] %s\n' "$SECONDS" "$*"; }

if [ "${OTEL_LOOPGUARD_NATIVE:-1}" = "0" ]; then
  say "native module skipped (OTEL_LOOPGUARD_NATIVE=0): the Python path is used"
  exit 0
fi
if ! command -v cargo >/dev/null 2>&1; then
  say "cargo not found: the Python path is used (install Rust from rustup.rs to build native/)"
  exit 0
fi
key=$( { cd native && cat Cargo.toml Cargo.lock pyproject.toml $(find src -type f | sort); rustc --version; } \
       | sha256sum | cut -c1-16)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
  say "native module up to date in $venv (source key $key): the native path is used"
  exit 0
fi
[ "${1:-}" = "--status" ] && exit 1
[ -x "$venv/bin/python" ] || { say "no virtualenv at $venv: run bash scripts/setup.sh first"; exit 2; }

talking() {
  local what="$1"; shift
  local status_file
  status_file=$(mktemp)
  ( "$@" 2>&1; echo $? > "$status_file" ) | TALK_SINCE=$(( $(date +%s) - SECONDS )) bash scripts/talk.sh native "$what" "  "
  local status
  status=$(cat "$status_file")
  rm -f "$status_file"
  return "$status"
}
give_up() {  # the package still works: say so, and leave the Python path in place
  say "failed while $1: the Python path is used (the differential tests fail on CI when cargo is present)"
  exit 0
}

dir="$cache/$key"
wheel=$(ls "$dir"/otel_loopguard_native-*.whl 2>/dev/null | head -1 || true)
if [ -n "$wheel" ]; then
  say "reusing the native wheel built from the same sources ($dir)"
else
  say "building the native module with $(cargo --version) (source key $key; a first build fetches crates and takes about a minute)"
  if ! "$venv/bin/python" -c 'import maturin' 2>/dev/null && ! [ -x "$venv/bin/maturin" ]; then
    talking "installing maturin" "$venv/bin/python" -m pip install --progress-bar off "maturin>=1.5,<2" \
      || give_up "installing maturin"
  fi
  tmp="$cache/tmp.$$"
  mkdir -p "$tmp"
  CARGO_TARGET_DIR="$cache/target" talking "building" "$venv/bin/maturin" build --release \
    -j "${NATIVE_JOBS:-1}" -m native/Cargo.toml -i "$venv/bin/python" -o "$tmp" \
    || { rm -rf "$tmp"; give_up "building"; }
  rm -rf "$dir"
  mv "$tmp" "$dir"
  # Bounded: the three newest wheels are kept (a branch switch back reuses one), cargo's folder too.
  { ls -td "$cache"/*/ | grep -v -e '/target/$' -e '/tmp\.' | tail -n +4 | xargs -r rm -rf; } || true
  wheel=$(ls "$dir"/otel_loopguard_native-*.whl | head -1)
fi
talking "installing the native wheel" "$venv/bin/python" -m pip install --progress-bar off --no-deps \
  --force-reinstall "$wheel" || give_up "installing the wheel"
"$venv/bin/python" -c 'from otel_loopguard import native; assert native.AVAILABLE' \
  || give_up "importing the module"
echo "$key" > "$stamp"
say "native module installed: the native path is used (OTEL_LOOPGUARD_PURE_PYTHON=1 forces the Python path)"
