"""`otel-loopguard`: the command line, a thin shell over the audit and the receiver."""

from __future__ import annotations

import argparse
import logging
import sys
from importlib import resources
from pathlib import Path
from typing import Optional, Sequence

from .version import __version__
from .receiver.serve import command as serve_command


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None and _serving(sys.argv[1:]):  # a process started to serve, not a caller's: before
        serve_command.prepare_process()  # the other commands are imported (a restart answers sooner)
    parser = _parser()
    args = parser.parse_args(argv)
    quiet = logging.INFO if args.command == "serve" else logging.WARNING  # a service logs its findings
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else quiet,
        format="otel-loopguard: %(levelname)s: %(message)s",
    )
    return int(args.handler(args))


def _serving(args: Sequence[str]) -> bool:
    """The command is `serve` (the first argument that is not an option)."""
    return next((a for a in args if not a.startswith("-")), None) == "serve"


def _parser() -> argparse.ArgumentParser:
    from .audit import command as audit_command
    from .calibrate import command as calibrate_command

    parser = argparse.ArgumentParser(prog="otel-loopguard", description="Catch AI agents stuck in tool-call loops.")
    parser.add_argument("--version", action="version", version=f"otel-loopguard {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    audit = sub.add_parser("audit", help="score recorded traces (exit 0 pass, 1 fail, 2 bad input, 3 unscorable)")
    audit_command.add_arguments(audit)
    audit.set_defaults(handler=audit_command.run)
    calibrate = sub.add_parser("calibrate", help="replay recorded runs under candidate thresholds, per tool")
    calibrate_command.add_arguments(calibrate)
    calibrate.set_defaults(handler=calibrate_command.run)
    serve = sub.add_parser("serve", help="run the OTLP/gRPC receiver: dedupe, order, detect, emit finding spans")
    serve_command.add_arguments(serve)
    serve.set_defaults(handler=serve_command.run)
    from .mcp import command as mcp_command

    proxy = sub.add_parser("mcp-proxy", help="a proxy before an MCP server (stdio): traces and guards its tools/call")
    mcp_command.add_arguments(proxy)
    proxy.set_defaults(handler=mcp_command.run)
    demo = sub.add_parser("demo", help="scripted looping agents, judged live; then an audit of recorded traces")
    demo.set_defaults(handler=_demo)
    return parser


def _demo(args: argparse.Namespace) -> int:
    from .demo import run as live_demo

    print("== 1. Live: scripted agents traced with otel_loopguard.install(), judged by the receiver ==\n")
    live_demo()
    print("\n== 2. Recorded: the audit of bundled example traces (what CI would run) ==\n")
    examples = resources.files("otel_loopguard") / "examples"
    with resources.as_file(examples) as folder:
        files = sorted(Path(folder).glob("*.ndjson"))
        print(f"Auditing {len(files)} bundled example traces ({', '.join(f.name for f in files)}):\n")
        args.files, args.format, args.policy, args.key_file = files, "text", None, None
        args.run_id_attribute = None
        from .audit import command as audit_command

        status = audit_command.run(args)
    print(
        f"audit exit status would be {status} (0 pass, 1 a run fails the release rule, 2 bad input, "
        "3 unscorable). Audit your own traces with: otel-loopguard audit FILE... [--format json]"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
