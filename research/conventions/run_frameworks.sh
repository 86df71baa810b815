#!/usr/bin/env bash
# Issue 30: recreate the per-framework venvs and every capture in fw_captures/, then audit them
# (fw_captures/AUDIT.md) and run today's recognise() over every span (fw_captures/RECOGNISE.md).
#
#   research/conventions/run_frameworks.sh [pai] [adk] [smol] [li] [crew]     (default: all five)
#
# One venv per framework under $VENVS (default: <repo>/.venvs/<fw>, git-ignored): their
# dependencies conflict (google-adk pins opentelemetry <1.45; the others take 1.45.2). Each is
# installed from requirements-<fw>.txt (PyPI only); RECREATE=0 keeps an existing venv.
# The audit runs in the project's own environment: $PROJECT_PY (default <repo>/.venv/bin/python) with PYTHONPATH=<repo>. No network is used by the runs themselves:
# fw_common.py refuses non-loopback connections and records any attempt in each capture's meta.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENVS=${VENVS:-$ROOT/.venvs}
RECREATE=${RECREATE:-1}
PY_BASE=${PY_BASE:-python3}
PROJECT_PY=${PROJECT_PY:-$ROOT/.venv/bin/python}
FWS=("$@")
[ ${#FWS[@]} -gt 0 ] || FWS=(pai adk smol li crew)
OUT=$HERE/fw_captures
mkdir -p "$OUT"
start=$(date +%s)
log() { echo "[$(( $(date +%s) - start ))s] $*"; }

venv() {  # venv <fw>: (re)create and install requirements-<fw>.txt; record the full freeze
  local fw=$1 v=$VENVS/$1
  if [ "$RECREATE" = 1 ] || [ ! -x "$v/bin/python" ]; then
    log "$fw: creating venv $v"
    rm -rf "$v"
    "$PY_BASE" -m venv "$v"
    "$v/bin/pip" install -q --upgrade pip >/dev/null
    log "$fw: pip install -r requirements-$fw.txt"
    "$v/bin/pip" install -q -r "$HERE/requirements-$fw.txt"
  fi
  "$v/bin/pip" freeze --all > "$OUT/VERSIONS-$fw.txt"
  log "$fw: venv ready ($(wc -l < "$OUT/VERSIONS-$fw.txt") packages)"
}

run() {  # run <fw> <script> <args...>
  local fw=$1; shift
  local line
  line=$("$VENVS/$fw/bin/python" "$HERE/$@" 2>"${TMPDIR:-/tmp}/fw_run.err" | grep -v '^\s*-\|^  ' | tail -1) || true
  log "  ${line:-FAILED: $* (see ${TMPDIR:-/tmp}/fw_run.err)}"
}

BASE=(healthy repeat pingpong errors parallel)
for fw in "${FWS[@]}"; do
  venv "$fw"
  case $fw in
    pai)
      for i in genai openinference; do
        for s in "${BASE[@]}" errors-raise delegate delegate-ok; do run pai pai_run.py --instr $i --scenario $s; done
        for s in healthy repeat; do run pai pai_run.py --instr $i --scenario $s --content off; done
      done ;;
    adk)
      for i in builtin builtin-content openinference; do
        for s in "${BASE[@]}" errors-raise handoff-pingpong handoff-single delegate; do
          run adk adk_run.py --instr $i --scenario $s
        done
      done
      for s in healthy repeat; do run adk adk_run.py --instr openinference --scenario $s --content off; done ;;
    smol)
      for s in "${BASE[@]}" delegate delegate-ok; do run smol smol_run.py --scenario $s; done
      for s in healthy repeat; do run smol smol_run.py --scenario $s --content off; done
      for s in "${BASE[@]}"; do run smol smol_run.py --agent code --scenario $s; done ;;
    li)
      for i in openinference traceloop; do
        for s in "${BASE[@]}" handoff-pingpong handoff-single; do run li li_run.py --instr $i --scenario $s; done
        for s in healthy repeat; do run li li_run.py --instr $i --scenario $s --content off; done
      done ;;
    crew)
      for i in openinference openinference-events traceloop; do
        for s in "${BASE[@]}" delegate; do run crew crew_run.py --instr $i --scenario $s; done
      done
      for i in openinference openinference-events; do
        for s in healthy repeat; do run crew crew_run.py --instr $i --scenario $s --content off; done
      done
      for i in openinference openinference-events traceloop; do
        for s in "${BASE[@]}"; do run crew crew_run.py --instr $i --scenario $s --model openai-local; done
      done ;;
    *) echo "unknown framework $fw" >&2; exit 2 ;;
  esac
done
log "audit: $PROJECT_PY fw_audit.py (writes fw_captures/AUDIT.md)"
PYTHONPATH=$ROOT "$PROJECT_PY" "$HERE/fw_audit.py" | tail -1
log "recognise: $PROJECT_PY fw_recognise.py (writes fw_captures/RECOGNISE.md)"
PYTHONPATH=$ROOT "$PROJECT_PY" "$HERE/fw_recognise.py" > /dev/null
log "done"
