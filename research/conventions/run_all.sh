#!/usr/bin/env bash
# Re-create every capture under captures/. Two venvs are needed because the Traceloop and the
# OTel-contrib OpenAI Agents instrumentations both install opentelemetry/instrumentation/openai_agents/.
#   VENV_MAIN: openai-agents, langchain, langgraph, both OpenInference instrumentations,
#              Traceloop's opentelemetry-instrumentation-openai-agents and -langchain
#   VENV_V2:   openai-agents + opentelemetry-instrumentation-openai-agents-v2
# See FINDINGS.md for the pip lines.
set -euo pipefail
cd "$(dirname "$0")"
VENV_MAIN=${VENV_MAIN:-/tmp/rvenv}
VENV_V2=${VENV_V2:-/tmp/rvenv_v2}
PY=$VENV_MAIN/bin/python
PY2=$VENV_V2/bin/python
start=$(date +%s.%N)
run() { echo "+ $*"; "$@" > "${TMPDIR:-/tmp}/loopguard_run.out"; head -1 "${TMPDIR:-/tmp}/loopguard_run.out"; }
for m in scripted chatcompletions responses; do
  run $PY  oa_run.py --instr openinference --model $m
  run $PY  oa_run.py --instr traceloop     --model $m
  run $PY2 oa_run.py --instr genai         --model $m
done
run $PY  oa_run.py --instr openinference --model responses --error raise
run $PY  oa_run.py --instr traceloop     --model responses --error raise
run $PY2 oa_run.py --instr genai         --model responses --error raise
for c in instr-off sdk-off; do
  for m in scripted responses; do
    run $PY  oa_run.py --instr openinference --model $m --content $c
    run $PY  oa_run.py --instr traceloop     --model $m --content $c
    run $PY2 oa_run.py --instr genai         --model $m --content $c
  done
done
for i in openinference traceloop; do
  for inv in sync async; do
    for e in middleware toolexception raise; do
      run $PY lc_run.py --instr $i --invoke $inv --error $e
    done
  done
  run $PY lc_run.py --instr $i --content instr-off
done
# Handoffs between agents (issue 20): a ping-pong and two negative controls, three instrumentations.
for s in pingpong single supervisor; do
  run $PY  oa_handoff_run.py --instr openinference --scenario $s
  run $PY  oa_handoff_run.py --instr traceloop     --scenario $s
  run $PY2 oa_handoff_run.py --instr genai         --scenario $s
done
for s in pingpong single; do
  run $PY lg_handoff_run.py --instr openinference --scenario $s
  run $PY lg_handoff_run.py --instr traceloop     --scenario $s
done
for s in supervisor bounce; do
  run $PY lg_supervisor_run.py --instr openinference --scenario $s
  run $PY lg_supervisor_run.py --instr traceloop     --scenario $s
done
end=$(date +%s.%N)
echo "total wall: $(echo "$end - $start" | bc) s"
