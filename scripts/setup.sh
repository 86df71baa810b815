#!/usr/bin/env bash
# Create a virtualenv (.venv, or $VENV) and install otel-loopguard with the given extras, saying
# what it does. An existing virtualenv is reused when it was made from the same dependency list:
# a hash of pyproject.toml, the extras and the Python version, stored in the virtualenv. The
# package is installed editable, so changed sources never need a reinstall.
#
#   bash scripts/setup.sh [EXTRAS]      e.g. bash scripts/setup.sh test,phoenix
#
# The installer is uv (PyPI's `uv`: it downloads, unpacks and links in parallel): found on PATH,
# in .venv, or installed into the new virtualenv with pip. Where it cannot be had, or with
# LOOPGUARD_PIP=1, pip installs. Never silent for more than 10 s: the installer's own lines go
# through, and a line says it is still working when it is quiet (a large download, a wheel build).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
extras="${1:-}"
say() { printf '[setup %3ds] %s\n' "$SECONDS" "$*"; }

python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { say "python3 is $(python3 --version 2>&1); otel-loopguard needs Python 3.10 or later"; exit 2; }
key=$( { cat pyproject.toml; echo "extras=$extras"; python3 --version; } | sha256sum | cut -c1-16)
stamp="$venv/.otel-loopguard-setup"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
  # The optional Rust module (scripts/native.sh): one line when it is up to date (or no cargo).
  if native=$(VENV="$venv" bash scripts/native.sh --status); then
    say "$venv is up to date (extras: ${extras:-none}; dependency key $key): reused; ${native#*] }"
    exit 0
  fi
  say "$venv is up to date (extras: ${extras:-none}; dependency key $key): reused"
  VENV="$venv" bash scripts/native.sh
  exit 0
fi

# A command's lines pass through, indented; when it has said nothing for 8 s, a line says that
# it is still working (scripts/talk.sh).
try_talking() {
  local what="$1"; shift
  local status_file
  status_file=$(mktemp)
  ( "$@" 2>&1; echo $? > "$status_file" ) | TALK_SINCE=$(( $(date +%s) - SECONDS )) bash scripts/talk.sh setup "$what" "  "
  local status
  status=$(cat "$status_file")
  rm -f "$status_file"
  [ "$status" = 0 ] || { say "failed while $what (exit status $status)"; return 2; }
}
talking() { try_talking "$@" || exit 2; }
run_pip() {
  local what="$1"; shift
  talking "$what" "$venv/bin/python" -m pip "$@" --progress-bar off
}
# A working uv: $UV, on PATH, the test virtualenv's, or this one's.
find_uv() {
  local candidate
  for candidate in "${UV:-}" "$(command -v uv || true)" .venv/bin/uv "$venv/bin/uv"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" --version >/dev/null 2>&1; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

if [ -x "$venv/bin/python" ]; then
  say "$venv exists but was made from another dependency list: updating it (extras: ${extras:-none})"
else
  say "creating the virtualenv $venv with $(python3 --version)"
  talking "creating the virtualenv" python3 -m venv "$venv"
fi
rm -f "$stamp"  # set again only once everything below succeeded
target="."
[ -n "$extras" ] && target=".[$extras]"
uv=""
if [ "${LOOPGUARD_PIP:-}" != 1 ]; then
  if ! uv=$(find_uv); then
    say "getting uv (PyPI's uv package) into $venv with pip"
    uv=""
    try_talking "getting uv" "$venv/bin/python" -m pip install --progress-bar off uv && uv=$(find_uv) \
      || { uv=""; say "uv could not be had: pip installs"; }
  fi
fi
if [ -n "$uv" ]; then
  say "installing otel-loopguard (editable) with extras: ${extras:-none}, with $("$uv" --version | cut -d' ' -f1-2); a first install downloads them from PyPI"
  talking "installing" "$uv" pip install --python "$venv/bin/python" -e "$target"
else
  say "upgrading pip"
  run_pip "upgrading pip" install --upgrade pip
  say "installing otel-loopguard (editable) with extras: ${extras:-none}, with pip; a first install downloads them from PyPI"
  run_pip "installing" install -e "$target"
fi
echo "$key" > "$stamp"
say "done: $venv ready"
VENV="$venv" bash scripts/native.sh  # the optional Rust module, when cargo is present
