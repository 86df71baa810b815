#!/usr/bin/env bash
# Mutation testing of the detection core (docs/testing.md): every mutant mutmut makes of
# fingerprint/, policy/, progress/, detect/, findings/, score/ and receiver/runs/assembly.py is
# run against the tests that cover it, and the score per module is printed.
#
#   bash scripts/mutation.sh                 # the whole core (hours on 2 shared cores: docs/testing.md)
#   bash scripts/mutation.sh detect          # one package ...
#   bash scripts/mutation.sh detect/cycle    # ... or one module
#
# Too slow for CI: run it before a release. Exit 0 only when every module run scores at
# least 95 % of its non-equivalent mutants (scripts/mutation_equivalents.md lists the equivalent ones).
# MUTATION_JOBS sets the number of workers (default 2). MUTATION_SAMPLE=05 runs only the
# mutants whose number ends in 0 or 5 (a fixed fifth of each function's mutants, the same
# on every machine); any set of digits works, e.g. MUTATION_SAMPLE=0 for a tenth.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
if [ ! -x "$venv/bin/mutmut" ]; then
  bash scripts/setup.sh "test,mutation"
fi
sample=""
if [ -n "${MUTATION_SAMPLE:-}" ]; then
  sample="__mutmut_*[${MUTATION_SAMPLE}]"
fi
patterns=()
for module in "$@"; do
  module="${module%.py}"
  module="${module#otel_loopguard/}"
  patterns+=("otel_loopguard.${module//\//.}.*${sample}")
done
if [ ${#patterns[@]} -eq 0 ] && [ -n "$sample" ]; then
  patterns+=("otel_loopguard.*${sample}")
fi
# A fresh copy every time: mutmut keeps earlier results, which would not see new tests.
rm -rf mutants
"$venv/bin/mutmut" run --max-children "${MUTATION_JOBS:-2}" "${patterns[@]}" > mutants.log 2>&1 || {
  tail -n 40 mutants.log
  exit 2
}
"$venv/bin/mutmut" results --all true | "$venv/bin/python" scripts/mutation_report.py
