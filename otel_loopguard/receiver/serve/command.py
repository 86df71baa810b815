"""`otel-loopguard serve` flags -> ReceiverConfig -> a running receiver."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Optional

from ...errors import LoopguardError
from ..config import from_sources


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", metavar="HOST:PORT", help="OTLP/gRPC address to serve (default 127.0.0.1:4327)")
    parser.add_argument("--forward", metavar="HOST:PORT", help="inline: forward every unique span plus findings here")
    parser.add_argument(
        "--findings-only",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send only findings: to --forward if given, else to OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT "
        "(--no-findings-only: inline, whatever the environment or config file says)",
    )
    parser.add_argument("--policy", metavar="FILE", help="policy file (YAML or JSON)")
    parser.add_argument("--config", metavar="FILE", help="receiver settings file (YAML); see docs/receiver.md")
    parser.add_argument("--key-file", metavar="FILE", help="digest key file (default: OTEL_LOOPGUARD_KEY[_FILE])")
    parser.add_argument("--metrics-listen", metavar="HOST:PORT", help="serve Prometheus metrics here")
    parser.add_argument("--run-id-attribute", metavar="NAME", help="group runs by this attribute, e.g. gen_ai.conversation.id")
    parser.add_argument("--max-receive-bytes", type=int, metavar="N", help="largest request accepted (default 64 MiB)")
    parser.add_argument("--forward-queue-bytes", type=int, metavar="N",
                        help="inline: answer senders once their spans are queued, up to N bytes (default 256 MiB; "
                             "0: only once the downstream took them)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="keep the forward queue and the dedupe keys here, so a restart or a crash loses no "
                             "accepted span and forwards none twice (default: in memory only)")
    parser.add_argument("--state-fsync", action="store_true", default=None,
                        help="with --state-dir: force every write to disk before answering the sender (slower; "
                             "without it a killed process loses nothing, a power loss the last seconds)")
    parser.add_argument("--handover-wait-seconds", type=float, metavar="S",
                        help="with --state-dir: on SIGTERM, keep serving up to S seconds for a new receiver on the "
                        "same state directory to start and take over, so the port never closes (default 0: a "
                        "new receiver started first is waited for, none other)")
    parser.add_argument("--memory-limit-mib", type=int, metavar="N",
                        help="estimated memory of dedupe table, open runs, queues and requests stays within N MiB: "
                             "oldest open runs are judged early, then senders get UNAVAILABLE (default 1024)")
    parser.add_argument("--max-request-spans", type=int, metavar="N",
                        help="refuse a request of more spans than this (default 100000)")
    parser.add_argument("--gap-wait-seconds", type=float, metavar="S", help="wait for a missing call this long (default 10)")
    parser.add_argument("--dense-seq", action="store_true", default=None,
                        help="every loopguard.seq is numbered 1..N: a gap is a missing call (default: only marked ones)")
    parser.add_argument("--idle-timeout-seconds", type=float, metavar="S", help="complete a quiet run after this (default 30)")
    parser.add_argument("--root-grace-seconds", type=float, metavar="S", help="complete after the root ended + this (default 2)")
    # Downstream TLS and compression; headers (often API keys) only by environment or config file,
    # never on a command line that `ps` shows.
    parser.add_argument("--certificate-file", metavar="PEM", help="CA bundle to verify the downstream (implies TLS)")
    parser.add_argument("--client-certificate-file", metavar="PEM", help="mutual TLS: our certificate chain")
    parser.add_argument("--client-key-file", metavar="PEM", help="mutual TLS: our private key")
    # Who may send: TLS on the listen side (and /metrics), mutual TLS, bearer tokens. Tokens come
    # from a file or OTEL_LOOPGUARD_AUTH_TOKENS, never from a flag (`ps` shows flags).
    parser.add_argument("--tls-cert-file", metavar="PEM", help="serve TLS with this certificate chain")
    parser.add_argument("--tls-key-file", metavar="PEM", help="the private key of --tls-cert-file")
    parser.add_argument("--tls-client-ca-file", metavar="PEM", help="mutual TLS: require client certificates from this CA")
    parser.add_argument("--auth-token-file", metavar="FILE",
                        help="require authorization: Bearer <token>, tokens one a line (also OTEL_LOOPGUARD_AUTH_TOKENS)")
    parser.add_argument("--reload-poll-seconds", type=float, metavar="S",
                        help="reload the policy, certificate and token files when they change, looking this often "
                        "(default 2; 0: on SIGHUP only)")
    parser.add_argument("--annotate-phoenix-url", metavar="URL",
                        help="Phoenix's base URL, e.g. http://127.0.0.1:6006: each loop is also recorded in Phoenix's "
                        "annotations (trace, root span, the looping calls) through its REST API (API key: PHOENIX_API_KEY)")
    parser.add_argument("--compression", choices=("none", "gzip"), help="compress requests to the downstream (default none)")


def prepare_process() -> None:
    """Before `run`, in a process started to serve: the allocator that gives memory back after
    a burst (trim.py; may replace the process with itself, once). The process it becomes runs
    `python -m otel_loopguard.receiver.serve` with the same arguments: the serve command alone,
    without importing the other commands again (a restarted receiver answers that much sooner:
    docs/reliability.md, "Restarts without a gap")."""
    from ..ops import trim

    trim.serve_with_malloc(_serve_only_argv())


def _serve_only_argv() -> Optional[list[str]]:
    """The interpreter's options, then `-m otel_loopguard.receiver.serve` and the command line's
    arguments; None (the same command line again) when the command line is not understood."""
    orig, tail = list(getattr(sys, "orig_argv", [])), sys.argv[1:]
    if len(orig) < len(tail) + 2 or orig[len(orig) - len(tail):] != tail:
        return None
    head = orig[1:len(orig) - len(tail) - 1]  # without the interpreter and the program (module or script)
    if head and head[-1] == "-m":
        head = head[:-1]
    if any(not a.startswith("-") or a in ("-c", "-m") for a in head):  # an option with a value apart: not sure
        return None
    return [*head, "-m", "otel_loopguard.receiver.serve", *tail]


def main() -> int:
    """`otel-loopguard [-v] serve ...` for the serve command only (what prepare_process runs)."""
    import logging

    parser = argparse.ArgumentParser(prog="otel-loopguard")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_arguments(commands.add_parser("serve"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="otel-loopguard: %(levelname)s: %(message)s")  # as cli.py's for serve
    return run(args)


def run(args: argparse.Namespace) -> int:
    flags = {k: v for k, v in vars(args).items() if k not in ("handler", "command", "verbose", "config")}
    try:
        config = from_sources(flags, config_file=args.config)
        from .server import run_until_signal  # grpc is imported only when serving

        asyncio.run(run_until_signal(config))
    except LoopguardError as exc:
        print(f"otel-loopguard serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"otel-loopguard serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0
