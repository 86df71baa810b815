"""`otel-loopguard calibrate`: replay recorded runs under candidate policies, per tool.

Reads what `audit` reads (same readers), prepares every run once (integrity, fingerprints),
then judges it under the current policy and each `--sweep` candidate. Exit status: 0 a
report was written, 2 bad input or a bad sweep (the message names it), 3 the files held no
tool call (as audit's 3: nothing could be judged).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Optional, TextIO

from ..audit.inputs import read_inputs
from ..canon import load_key
from ..errors import LoopguardError
from ..fingerprint import Fingerprinter
from ..policy import load_policy, read_policy_data
from ..score import prepare
from .calibration import Calibration, calibrate
from .report import to_json, to_text
from .sweep import candidates, parse_sweep

EXIT_OK, EXIT_BAD_INPUT, EXIT_NOTHING = 0, 2, 3

_log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="NDJSON, OTLP/JSON (also the Collector's file exporter output) or OTLP protobuf")
    parser.add_argument("--sweep", action="append", default=[], metavar="KEY=VALUES",
                        help="candidate values of one threshold, budget or cap: repeat.stop_at=3..8, "
                             "tools.search.max_calls=5,10,20 (repeatable; one key at a time)")
    parser.add_argument("--format", choices=("text", "json", "html"), default="text")
    parser.add_argument("--output", "-o", type=Path, metavar="FILE", help="write the report here (default stdout)")
    parser.add_argument("--policy", type=Path, help="the current policy file (YAML or JSON), or seed-001")
    parser.add_argument("--key-file", type=Path, help="digest key file (default: OTEL_LOOPGUARD_KEY[_FILE])")
    parser.add_argument("--run-id-attribute", metavar="NAME", help="group OTLP spans into runs by this attribute")
    parser.add_argument("--dense-seq", action="store_true", help="sequences are numbered 1..N (as audit)")


def run(args: argparse.Namespace, out: Optional[TextIO] = None) -> int:
    try:
        cal = run_calibration(args.files, args.sweep, args.policy, args.key_file, args.run_id_attribute,
                              args.dense_seq)
    except LoopguardError as exc:
        print(f"otel-loopguard calibrate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not cal.prepared:
        print("otel-loopguard calibrate: no tool calls in the input files: nothing to calibrate", file=sys.stderr)
        return EXIT_NOTHING
    text = render(cal, args.format)
    if args.output is not None:
        try:
            args.output.write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"otel-loopguard calibrate: cannot write {args.output}: {exc.strerror}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print(f"otel-loopguard calibrate: wrote the {args.format} report to {args.output}", file=sys.stderr)
    else:
        (out or sys.stdout).write(text)
    return EXIT_OK


def render(cal: Calibration, fmt: str) -> str:
    if fmt == "json":
        return to_json(cal) + "\n"
    if fmt == "html":
        from .html import to_html

        return to_html(cal)
    return to_text(cal)


def run_calibration(files: list[Path], sweeps: list[str], policy_file: Optional[Path] = None,
                    key_file: Optional[Path] = None, run_id_attribute: Optional[str] = None,
                    dense_seq: bool = False) -> Calibration:
    parsed = [parse_sweep(s) for s in sweeps]  # bad sweeps fail before any file is read
    base = load_policy(policy_file)
    data, source = read_policy_data(policy_file)
    cands = candidates(base, data, source, parsed)
    fp = Fingerprinter(load_key(key_file=key_file) if key_file else load_key(), base)
    runs, empty = read_inputs(files, run_id_attribute, dense_seq)
    for path in empty:
        _log.warning("%s holds no tool calls: nothing in it to calibrate", path)
    return calibrate([prepare(r, fp) for r in runs], cands, base)
