"""`otel-loopguard audit`: score recorded traces; the exit status is the verdict.

0 every scored run passes the release rule, 1 a scored run fails it,
2 bad input, 3 nothing failed but some run could not be scored.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Optional, TextIO

from ..canon import load_key
from ..errors import LoopguardError
from ..fingerprint import Fingerprinter
from ..policy import load_policy
from ..score import RunReport, judge
from .inputs import read_inputs
from .junit import to_junit
from .report import summary_text, to_json, to_text

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_UNSCORABLE = 0, 1, 2, 3

_log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="NDJSON, OTLP/JSON or OTLP protobuf")
    parser.add_argument("--format", choices=("text", "json", "html", "junit"), default="text")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write the JUnit XML report to FILE (for CI)")
    parser.add_argument("--policy", type=Path, help="policy file (YAML or JSON)")
    parser.add_argument("--key-file", type=Path, help="digest key file (default: OTEL_LOOPGUARD_KEY[_FILE])")
    parser.add_argument(
        "--run-id-attribute", metavar="NAME", help="group OTLP spans into runs by this attribute (as serve does)"
    )
    parser.add_argument(
        "--dense-seq", action="store_true",
        help="sequences are numbered 1..N: a gap is a missing call (default: only where the source says so)",
    )


def run(args: argparse.Namespace, out: Optional[TextIO] = None) -> int:
    out = out or sys.stdout
    sources: dict[str, list[Path]] = {}  # run id -> its files (the JUnit report's suites)
    try:
        reports, empty = _audit(args.files, args.policy, args.key_file, getattr(args, "run_id_attribute", None),
                                getattr(args, "dense_seq", False), sources)
    except LoopguardError as exc:
        print(f"otel-loopguard audit: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a bug of ours: never exit 1, which CI reads as "a run fails"
        _log.debug("audit failed", exc_info=True)
        print(f"otel-loopguard audit: internal error ({type(exc).__name__}), no verdict; run with "
              "-v for the traceback and please report it", file=sys.stderr)
        return EXIT_BAD_INPUT
    status = exit_status(reports)
    junit = getattr(args, "junit", None)
    if junit is not None or args.format == "junit":
        document = to_junit(reports, args.files, empty, sources)
        if junit is not None and not _write(junit, document):
            return EXIT_BAD_INPUT
        if args.format == "junit":
            out.write(document)
            return status
    if args.format == "json":  # the contract's document, unchanged; the empty files are said on stderr
        for path in empty:
            _log.warning("%s holds no tool calls: nothing in it to judge", path)
        out.write(to_json(reports) + "\n")
    elif args.format == "html":  # audit/html.py: verdicts, broken rules and each run's timeline
        from .html import to_html

        out.write(to_html(reports, status))
    else:
        out.write(to_text(reports) + summary_text(reports, empty, status))
    return status


def audit(
    files: list[Path],
    policy_file: Optional[Path] = None,
    key_file: Optional[Path] = None,
    run_id_attribute: Optional[str] = None,
    dense_seq: bool = False,
) -> list[RunReport]:
    return _audit(files, policy_file, key_file, run_id_attribute, dense_seq)[0]


def _audit(files: list[Path], policy_file: Optional[Path], key_file: Optional[Path], run_id_attribute: Optional[str],
           dense_seq: bool, sources: Optional[dict[str, list[Path]]] = None) -> tuple[list[RunReport], list[Path]]:
    """The reports, and the files that held no tool call (`sources`: filled with each run's files)."""
    policy = load_policy(policy_file)
    fp = Fingerprinter(load_key(key_file=key_file) if key_file else load_key(), policy)
    runs, empty = read_inputs(files, run_id_attribute, dense_seq, sources)
    return [judge(r, fp) for r in runs], empty


def _write(path: Path, document: str) -> bool:
    """Write the JUnit report; a path that cannot be written is said on stderr (exit 2: no report,
    so no verdict a CI system could show)."""
    try:
        path.write_text(document, encoding="utf-8")
    except OSError as exc:
        print(f"otel-loopguard audit: cannot write the JUnit report {path}: {exc.strerror}", file=sys.stderr)
        return False
    return True


def exit_status(reports: list[RunReport]) -> int:
    verdicts = [r.passed for r in reports]
    if False in verdicts:
        return EXIT_FAIL
    if None in verdicts or not verdicts:
        return EXIT_UNSCORABLE
    return EXIT_PASS
