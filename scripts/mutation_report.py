"""Mutation score per core module, from the results of `mutmut run` (scripts/mutation.sh).

Reads `mutmut results --all true` on standard input. Mutants named in the tables of
scripts/mutation_equivalents.md (a mutant name or an fnmatch pattern in backticks, first
column) are left out of the score and counted apart: each row there says why the mutant
cannot be told from the original. Exit 1 when a module is below the target.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

DOC = Path(__file__).resolve().parent / "mutation_equivalents.md"
TARGET = 95.0
KILLED = {"killed", "timeout", "segfault", "caught by type check"}
NOT_KILLED = {"survived", "no tests", "suspicious"}
# Row of the equivalent-mutant table: | `name or pattern` | reason |
_ROW = re.compile(r"^\|\s*`(otel_loopguard\.[^`]+)`\s*\|")


def equivalents(doc: Path = DOC) -> list[str]:
    return [m.group(1) for line in doc.read_text("utf-8").splitlines() if (m := _ROW.match(line))]


def module_of(name: str) -> str:
    """`otel_loopguard.detect.cycle.xǁCycleDetectorǁobserve__mutmut_7` -> `detect/cycle.py`."""
    dotted = re.split(r"\.x[_ǁ]", name, maxsplit=1)[0]
    return dotted.removeprefix("otel_loopguard.").replace(".", "/") + ".py"


def parse(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        name, sep, status = line.strip().rpartition(": ")
        if sep and name.startswith("otel_loopguard."):
            out[name] = status
    return out


def report(results: dict[str, str], patterns: list[str], target: float) -> tuple[list[str], bool]:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[str] = []
    used: set[str] = set()
    for name, status in sorted(results.items()):
        module = module_of(name)
        match = next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)
        if match is not None:
            used.add(match)
            if status in KILLED or status in NOT_KILLED:  # only those this run checked
                counts[module]["equivalent"] += 1
        elif status in KILLED:
            counts[module]["killed"] += 1
        elif status in NOT_KILLED:
            counts[module]["not killed"] += 1
            survivors.append(f"  {status:10} {name}")
        else:  # not checked, skipped: outside this run's selection
            counts[module]["not run"] += 1
    rows = [f"{'module':32} {'mutants':>7} {'equiv':>5} {'killed':>6} {'alive':>5} {'score':>7}"]
    ok = True
    for module, c in sorted(counts.items()):
        judged = c["killed"] + c["not killed"]
        if not judged:
            continue
        score = 100.0 * c["killed"] / judged
        ok &= score >= target
        mark = "" if score >= target else f"  < {target:g} %"
        total = judged + c["equivalent"]
        rows.append(f"{module:32} {total:7} {c['equivalent']:5} {c['killed']:6} {c['not killed']:5} {score:6.1f} %{mark}")
    killed = sum(c["killed"] for c in counts.values())
    judged = killed + sum(c["not killed"] for c in counts.values())
    if judged:
        rows.append(f"{'all':32} {judged + sum(c['equivalent'] for c in counts.values()):7} "
                    f"{sum(c['equivalent'] for c in counts.values()):5} {killed:6} {judged - killed:5} "
                    f"{100.0 * killed / judged:6.1f} %")
    if survivors:
        rows += ["", "not killed (neither by a test nor listed in scripts/mutation_equivalents.md):", *survivors]
    stale = [p for p in patterns if p not in used and any(module_of(p) == module_of(n) for n in results)]
    if stale:
        rows += ["", "listed as equivalent but no such mutant in this run (renumbered? recheck):",
                 *(f"  {p}" for p in stale)]
    return rows, ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=float, default=TARGET, help="minimum score per module, in %%")
    args = ap.parse_args()
    rows, ok = report(parse(sys.stdin.read().splitlines()), equivalents(), args.target)
    print("\n".join(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
