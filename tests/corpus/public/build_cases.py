"""Write the public-report corpus: one NDJSON recorded run per case and `manifest.json`.

Each case reconstructs, as a short recorded run, a loop (or a legitimate run that looks
loopy) that a user reported to an agent project. The payloads carry the noise the report
describes (timestamps, pids, timings, re-ranked hits, reworded queries...) the way the tool
would print it. Labels are written here, beside the run, before any product code judges it
(the git history shows the order). Nothing here imports otel_loopguard.

    python tests/corpus/public/build_cases.py      # rewrites the NDJSON files and manifest.json

Deterministic: every case seeds its own random generator.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent

CASES: list[dict[str, Any]] = []


class Run:
    """Calls of one recorded run; `mark()` names the call a guard must have stopped by."""

    def __init__(self, seed: str, id_style: str = "openai"):
        self.rnd = random.Random(int(hashlib.sha256(seed.encode()).hexdigest()[:12], 16))
        self.calls: list[dict[str, Any]] = []
        self.id_style = id_style
        self.stop_seq: Optional[int] = None

    def _call_id(self, tool: str) -> str:
        alphabet = string.ascii_letters + string.digits
        if self.id_style == "anthropic":
            return "toolu_01" + "".join(self.rnd.choice(alphabet) for _ in range(22))
        if self.id_style == "gemini":
            return f"{tool}-{1750000000000 + self.rnd.randrange(10**8)}-{self.rnd.getrandbits(48):012x}"
        return "call_" + "".join(self.rnd.choice(alphabet) for _ in range(24))

    def add(self, tool: str, arguments: Any, observation: Any, ok: Optional[bool] = None,
            turn: Optional[int] = None) -> int:
        seq = len(self.calls) + 1
        record: dict[str, Any] = {
            "sequence": seq,
            "call_id": self._call_id(tool),
            "turn": turn if turn is not None else seq,
            "tool": tool,
            "arguments": arguments,
            "observation": observation,
        }
        if ok is not None:
            record["ok"] = ok
        self.calls.append(record)
        return seq

    def mark(self) -> None:
        """The call just added is the latest at which a guard must have stopped."""
        self.stop_seq = len(self.calls)

    def hexid(self, n: int = 16) -> str:
        return "".join(self.rnd.choice("0123456789abcdef") for _ in range(n))


def clock(start: str, rnd: random.Random, lo: float = 3.0, hi: float = 40.0) -> Callable[[], datetime]:
    """A wall clock that moves forward by a random step on every read."""
    state = {"t": datetime.fromisoformat(start).replace(tzinfo=timezone.utc)}

    def tick() -> datetime:
        state["t"] += timedelta(seconds=rnd.uniform(lo, hi))
        return state["t"]

    return tick


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def registrar(cases: list[dict[str, Any]]) -> Callable[..., Callable[[Callable[[], Any]], Callable[[], Any]]]:
    """The `@case(...)` decorator of one set: each case it marks is added to `cases`."""
    def case(number: int, name: str, cls: str, source_url: str, source_summary: str, kind_hint: str,
             noise: str, why: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
        def register(build: Callable[[], Any]) -> Callable[[], Any]:
            cases.append({"number": number, "name": name, "class": cls, "source_url": source_url,
                          "source_summary": source_summary, "kind_hint": kind_hint, "noise": noise,
                          "why": why, "build": build})
            return build
        return register
    return case


case = registrar(CASES)


# ---------------------------------------------------------------------------------------------
# Loops
# ---------------------------------------------------------------------------------------------

@case(1, "pi-ls-repeat", "loop", "https://github.com/earendil-works/pi/issues/6158",
      "Agent fixing a Jupyter config ran `ls` on the same directory 6 times in a row, then `ls -la` 5 times, identical output each time, never reaching the write step.",
      "repeat", "none (exact repeats)",
      "Five identical `ls` calls with identical output are the default repeat stop threshold; nothing new is learnt after the first.")
def _() -> Run:
    r = Run("pi-6158")
    r.add("read", {"path": "/home/dev/.jupyter/jupyter_notebook_config.py"},
          "c = get_config()\nc.NotebookApp.extra_static_paths = ['/home/dev/.jupyter/custom']\nc.NotebookApp.open_browser = False\n")
    listing = "custom.css\ncustom.js\n"
    for i in range(6):
        r.add("bash", {"command": "ls /home/dev/.jupyter/custom/"}, listing)
        if i == 4:
            r.mark()
    long = ("total 16\ndrwxr-xr-x 2 dev dev 4096 Jun 28 21:14 .\ndrwxr-xr-x 5 dev dev 4096 Jun 28 21:02 ..\n"
            "-rw-r--r-- 1 dev dev  812 Jun 28 21:14 custom.css\n-rw-r--r-- 1 dev dev 1290 Jun 27 09:40 custom.js\n")
    for _ in range(5):
        r.add("bash", {"command": "ls -la /home/dev/.jupyter/custom/"}, long)
    return r


@case(2, "prime-agent-diagnostic-respelled", "loop", "https://github.com/PrimeIntellect-ai/prime-agent/issues/1326",
      "Debugging a schema validation error, the agent issued the same diagnostic command (same tool, same normalized input) 20-23 times in a row; results were empty or unchanged.",
      "repeat", "the same command spelled differently (quotes, spacing, ./ prefix)",
      "The command is the same after normalizing quoting and whitespace and its answer never changes, so the fifth equivalent call is the repeat stop threshold.")
def _() -> Run:
    r = Run("prime-1326")
    r.add("bash", {"command": "python -m app.validate fixtures/order_1042.json"},
          {"exit_code": 1, "stdout": "", "stderr": "jsonschema.exceptions.ValidationError: Additional properties are not allowed ('discount_code' was unexpected)\n\nFailed validating 'additionalProperties' in schema['properties']['items']['items']\n"})
    spellings = [
        "jq '.properties.items' schemas/order.schema.json",
        "jq \".properties.items\" schemas/order.schema.json",
        "jq '.properties.items'  schemas/order.schema.json",
        "jq '.properties.items' ./schemas/order.schema.json",
        "jq  '.properties.items' schemas/order.schema.json",
        "jq \".properties.items\" ./schemas/order.schema.json",
        "jq '.properties.items' schemas/order.schema.json",
        "jq \".properties.items\"  schemas/order.schema.json",
    ]
    out = ('{\n  "type": "array",\n  "items": {\n    "type": "object",\n    "additionalProperties": false,\n'
           '    "required": ["sku", "qty"],\n    "properties": {\n      "sku": {"type": "string"},\n      "qty": {"type": "integer"}\n    }\n  }\n}\n')
    for i, cmd in enumerate(spellings):
        r.add("bash", {"command": cmd}, {"exit_code": 0, "stdout": out, "stderr": ""})
        if i == 4:
            r.mark()
    return r


@case(3, "open-science-grep-variants", "loop", "https://github.com/ai4s-research/open-science/issues/121",
      "An OpenCode-based session kept re-running essentially the same grep/diagnostic command for many minutes without progress, even after the user pointed out the repetition.",
      "no_progress", "flag order, quoting, a `| head` pipe, grep vs rg: same hits every time",
      "After the first search every variant returns the same three hits, so the sixth decision in a row with nothing new is the no_progress stop threshold.")
def _() -> Run:
    r = Run("open-science-121")
    hits = ("src/session/processor.ts:212:      if (part.state.status === \"state-completed\") {\n"
            "src/session/processor.ts:388:        emit(\"state-completed\", part.id)\n"
            "src/tool/task.ts:97:  // state-completed is sent once per tool part\n")
    cmds = [
        "grep -rn \"state-completed\" src/",
        "grep -rn 'state-completed' src/ | head -50",
        "grep -nr \"state-completed\" src",
        "rg -n state-completed src/",
        "grep -rn \"state-completed\" src/ --include=*.ts",
        "rg -n 'state-completed' src",
        "grep -rn state-completed ./src/",
        "grep -rn \"state-completed\" src/ | head -100",
        "rg -n \"state-completed\" src/ -g '*.ts'",
    ]
    for i, cmd in enumerate(cmds):
        r.add("bash", {"command": cmd, "description": "Find where state-completed is emitted"}, hits)
        if i == 6:
            r.mark()
    return r


@case(4, "deepagents-exit-code-success", "loop", "https://github.com/langchain-ai/deepagents/pull/3206",
      "The deepagents execute tool returned status success even when the command exited non-zero, so the agent retried a persistently failing command without bound (638 LLM turns in production).",
      "error_streak", "fresh timestamp, pid, elapsed seconds in each failure; tool status says success, only exit_code shows the failure",
      "The same command fails the same way on every call (only the log clock, pid and elapsed time change), so the fourth failure in a row is the error_streak stop threshold.")
def _() -> Run:
    r = Run("deepagents-3206")
    tick = clock("2026-05-06T14:02:00", r.rnd, 20, 70)
    r.add("ls", {"path": "/workspace/scripts"}, ["sync_orders.py", "backfill.py", "README.md"])
    r.add("read_file", {"file_path": "/workspace/scripts/sync_orders.py", "offset": 0, "limit": 40},
          "     1\timport logging, os, sys, time\n     2\timport psycopg\n     3\t\n     4\tDSN = os.environ.get(\"ORDERS_DSN\", \"postgresql://orders@db:5432/orders\")\n")
    for i in range(9):
        t = tick()
        pid = r.rnd.randrange(20000, 60000)
        stamp = t.strftime("%Y-%m-%d %H:%M:%S,") + f"{r.rnd.randrange(1000):03d}"
        elapsed = r.rnd.uniform(3.0, 3.3)
        text = (f"{stamp} INFO sync_orders[{pid}]: connecting to postgresql://orders@db:5432/orders\n"
                f"{stamp} WARNING sync_orders[{pid}]: attempt 1/3 failed: connection refused\n"
                f"{stamp} WARNING sync_orders[{pid}]: attempt 2/3 failed: connection refused\n"
                f"{stamp} ERROR sync_orders[{pid}]: giving up after 3 attempts ({elapsed:.2f}s)\n"
                "Traceback (most recent call last):\n  File \"/workspace/scripts/sync_orders.py\", line 41, in <module>\n"
                "psycopg.OperationalError: connection failed: Connection refused\n\tIs the server running on host \"db\" (172.18.0.3) and accepting TCP/IP connections on port 5432?\n"
                f"\n[Command failed with exit code 1]")
        r.add("execute", {"command": "python scripts/sync_orders.py --since 2026-05-01"}, text, ok=True)
        if i == 3:
            r.mark()
    return r


@case(5, "cortex-healthcheck-volatile", "loop", "https://github.com/BaseIntelligence/bounty-challenge/issues/50173",
      "Cortex's doom-loop detector compares whole tool outputs for equality, so the same call repeated with output that changes only in timestamps, counters or ordering is never flagged and runs many useless rounds.",
      "repeat", "Date header, request id and uptime counter inside the raw HTTP response text",
      "The same request gets the same 503 body every time apart from the clock, request id and uptime, so the fifth equivalent call is the repeat stop threshold.")
def _() -> Run:
    r = Run("cortex-50173")
    tick = clock("2026-04-07T09:31:00", r.rnd, 8, 25)
    uptime = 412_000
    for i in range(9):
        t = tick()
        uptime += r.rnd.randrange(9000, 26000)
        text = ("HTTP/1.1 503 Service Unavailable\r\n"
                f"Date: {t.strftime('%a, %d %b %Y %H:%M:%S GMT')}\r\n"
                "Content-Type: application/json\r\n"
                f"X-Request-Id: {r.hexid(8)}-{r.hexid(4)}-{r.hexid(4)}-{r.hexid(4)}-{r.hexid(12)}\r\n\r\n"
                f"{{\"status\":\"unhealthy\",\"uptime_ms\":{uptime},\"checks\":{{\"db\":\"dial tcp 127.0.0.1:5432: connect: connection refused\",\"cache\":\"ok\"}}}}")
        r.add("run_command", {"command": "curl -si http://localhost:8080/healthz", "cwd": "/srv/api"}, text)
        if i == 4:
            r.mark()
    return r


@case(6, "jiuwenswarm-pytest-same-assertion", "loop", "https://github.com/openJiuwen-ai/jiuwenswarm/issues/3560",
      "A ReAct agent looped pytest -> same assertion fails -> tiny patch -> pytest, treating each identical failure as new and exhausting its budget; the proposed breaker normalizes temp paths and timings to see the repeats.",
      "error_streak", "pytest timing line, tmp_path numbering, a new small patch between runs",
      "The same test fails with the same assertion after every patch (only the duration and tmp dir change), so the fourth identical failure is the error_streak stop threshold even with patches interleaved.")
def _() -> Run:
    r = Run("jiuwenswarm-3560")
    patches = [
        ("    total = sum(line.amount for line in lines)", "    total = round(sum(line.amount for line in lines), 2)"),
        ("    return Invoice(total=total, currency=cur)", "    return Invoice(total=Decimal(total), currency=cur)"),
        ("    cur = header.get(\"currency\")", "    cur = header.get(\"currency\", \"EUR\")"),
        ("    lines = parse_lines(rows)", "    lines = parse_lines(rows[1:])"),
        ("    total = round(sum(line.amount for line in lines), 2)", "    total = sum(Decimal(str(l.amount)) for l in lines)"),
        ("    if not rows:", "    if rows is None or not rows:"),
    ]
    tmp = 11
    for i, (old, new) in enumerate(patches):
        r.add("edit_file", {"path": "src/invoice/parse.py", "old_str": old, "new_str": new},
              "The file src/invoice/parse.py has been edited successfully.")
        tmp += 1
        dur = r.rnd.uniform(1.8, 2.9)
        out = ("============================= test session starts ==============================\n"
               "platform linux -- Python 3.12.4, pytest-8.3.2, pluggy-1.5.0\nrootdir: /workspace\ncollected 24 items\n\n"
               "tests/test_parse.py .......F................                                [100%]\n\n"
               "=================================== FAILURES ===================================\n"
               "_____________________________ test_parse_invoice ______________________________\n\n"
               f"tmp_path = PosixPath('/tmp/pytest-of-agent/pytest-{tmp}/test_parse_invoice0')\n\n"
               "    def test_parse_invoice(tmp_path):\n        inv = parse_invoice(write_sample(tmp_path))\n"
               ">       assert inv.total == Decimal(\"118.40\")\n"
               "E       AssertionError: assert Decimal('118.4000000000000056843418860808014869689941406250') == Decimal('118.40')\n\n"
               "tests/test_parse.py:31: AssertionError\n"
               "=========================== short test summary info ============================\n"
               "FAILED tests/test_parse.py::test_parse_invoice - AssertionError: assert Decimal('118.400000...\n"
               f"========================= 1 failed, 23 passed in {dur:.2f}s =========================\n")
        r.add("bash", {"command": "python -m pytest tests/test_parse.py -q"}, {"exit_code": 1, "output": out}, ok=False)
        if i == 3:
            r.mark()
    return r


@case(7, "pi-echo-noop-counter", "loop", "https://github.com/earendil-works/pi/issues/9637",
      "A session entered a degenerate loop of 220+ identical `echo noop` exec calls over 25 minutes; the output was trivial and only a cosmetic counter incremented, until an external budget stopped it.",
      "repeat", "an incrementing label and the duration in each result; the output only echoes the command",
      "Identical arguments and an answer that only echoes them with a moving counter bring nothing, so the fifth call is the repeat stop threshold.")
def _() -> Run:
    r = Run("pi-9637")
    for i in range(10):
        r.add("fabric_exec", {"command": "bash", "args": ["-c", "echo noop"]},
              {"stdout": "noop\n", "exit_code": 0, "label": f"noop{131 + i}", "duration_ms": r.rnd.randrange(3, 9)})
        if i == 4:
            r.mark()
    return r


@case(8, "sasnode-api-404-retries", "loop", "https://sasnode.uk/c/a-vegtelen-tool-call-lanc-amikor-az-agent-nem-tud-leallni",
      "A research agent fetching a company's stock data made twelve consecutive calls to the same API endpoint that kept answering 404; it never stopped on its own.",
      "error_streak", "timestamp and trace id inside each error body",
      "The same request fails with the same 404 each time (only the timestamp and trace id change), so the fourth failure in a row is the error_streak stop threshold.")
def _() -> Run:
    r = Run("sasnode-404")
    tick = clock("2026-06-19T18:02:00", r.rnd, 2, 9)
    url = "https://api.marketdata.example/v2/companies/ACMR/fundamentals?period=quarterly"
    for i in range(12):
        t = tick()
        body = (f"{{\"timestamp\":\"{iso(t)}\",\"status\":404,\"error\":\"Not Found\","
                f"\"message\":\"No fundamentals for symbol ACMR\",\"path\":\"/v2/companies/ACMR/fundamentals\",\"traceId\":\"{r.hexid(32)}\"}}")
        r.add("http_get", {"url": url, "headers": {"Accept": "application/json"}},
              {"error": "HTTP 404 Not Found", "body": body}, ok=False)
        if i == 3:
            r.mark()
    return r


@case(9, "gemini-replace-nonunique", "loop", "https://github.com/google-gemini/gemini-cli/issues/2137",
      "Gemini CLI kept calling `replace` with an old_string that occurs 3 times, failing with the same 'expected 1 occurrence(s) but found 3' error for 2-3 minutes.",
      "error_streak", "none (exact repeats)",
      "The identical edit fails identically every time, so the fourth failure in a row is the error_streak stop threshold.")
def _() -> Run:
    r = Run("gemini-2137", "gemini")
    r.add("read_file", {"absolute_path": "/Users/dev/app/src/utils/format.ts"},
          "export function formatPrice(v: number) {\n  return `$${v.toFixed(2)}`;\n}\n\nexport function formatQty(q: number) {\n  return `${q}`;\n}\n")
    args = {"file_path": "/Users/dev/app/src/utils/format.ts", "old_string": "  return `${q}`;", "new_string": "  return q.toLocaleString();"}
    for i in range(8):
        r.add("replace", args, {"error": "Failed to edit, expected 1 occurrence(s) but found 3."}, ok=False)
        if i == 3:
            r.mark()
    return r


@case(10, "claude-read-directory", "loop", "https://github.com/anthropics/claude-code/issues/26512",
      "Claude Code in Cursor called Read on a directory path (/Users/your-pc) hundreds of times, each call failing, while saying it knew it was in a loop.",
      "error_streak", "none (exact repeats)",
      "The same read fails with the same error every time, so the fourth failure in a row is the error_streak stop threshold.")
def _() -> Run:
    r = Run("cc-26512", "anthropic")
    r.add("Glob", {"pattern": "**/*.md"}, "No files found")
    for i in range(10):
        r.add("Read", {"file_path": "/Users/your-pc"}, "EISDIR: illegal operation on a directory, read", ok=False)
        if i == 3:
            r.mark()
    return r


@case(11, "fak-denied-command-reissued", "loop", "https://github.com/anthony-chaudhary/fak/issues/3248",
      "A session re-issued the same PowerShell command that the guard denied as SECRET_EXFIL 110 times; the deny was right but nothing broke the loop.",
      "error_streak", "decision timestamp and a running decision counter in each denial",
      "The same command is denied the same way each time (only the clock and counter move), so the fourth denial in a row is the error_streak stop threshold.")
def _() -> Run:
    r = Run("fak-3248")
    tick = clock("2026-07-08T11:02:00", r.rnd, 4, 15)
    cmd = "Get-Content $env:USERPROFILE\\.aws\\credentials | Select-String aws_secret_access_key"
    counter = 88100
    for i in range(9):
        counter += r.rnd.randrange(3, 40)
        r.add("PowerShell", {"command": cmd},
              f"DENY PowerShell/SECRET_EXFIL digest=44136fa355b3 decision #{counter} at {iso(tick())}: "
              "reading credential material is not allowed in this session", ok=False)
        if i == 3:
            r.mark()
    return r


@case(12, "claudette-noop-edit-cycle", "loop", "https://github.com/mrdushidush/claudette/pull/77",
      "An apply_diff wrote a doubled-backslash regex, tests failed, and the model re-sent a byte-identical edit about 6 times; each reported ok:true and wrote nothing.",
      "cycle", "cargo timings in the test output",
      "The block (identical no-op edit, same failing test) repeats with only timings changing, so its third repetition is the cycle stop threshold.")
def _() -> Run:
    r = Run("claudette-77")
    r.add("read_file", {"path": "src/lexer.rs"}, "   40\tfn strip_indent(s: &str) -> String {\n   41\t    let re = Regex::new(r\"^\\\\s*\").unwrap();\n   42\t    re.replace(s, \"\").into_owned()\n   43\t}\n")
    diff = {"path": "src/lexer.rs", "before": "    let re = Regex::new(r\"^\\s*\").unwrap();", "after": "    let re = Regex::new(r\"^\\\\s*\").unwrap();"}
    for i in range(6):
        r.add("apply_diff", diff, {"ok": True, "path": "src/lexer.rs", "hunks_applied": 1})
        build = r.rnd.uniform(1.2, 3.4)
        run = r.rnd.uniform(0.02, 0.09)
        out = (f"   Compiling claudette v0.9.3 (/home/dev/claudette)\n    Finished `test` profile [unoptimized + debuginfo] target(s) in {build:.2f}s\n"
               "     Running unittests src/lib.rs (target/debug/deps/claudette-3f2a9c1e8b7d6a50)\n\nrunning 42 tests\n"
               "test lexer::tests::strips_leading_ws ... FAILED\n\nfailures:\n\n---- lexer::tests::strips_leading_ws stdout ----\n"
               "thread 'lexer::tests::strips_leading_ws' panicked at src/lexer.rs:88:9:\nassertion `left == right` failed\n  left: \"  foo\"\n right: \"foo\"\n\n"
               f"test result: FAILED. 41 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in {run:.2f}s\n\n"
               "error: test failed, to rerun pass `--lib`\n")
        r.add("shell", {"command": "cargo test --lib"}, {"exit_code": 101, "output": out}, ok=False)
        if i == 2:
            r.mark()
    return r


@case(13, "stella-test-interleaved-reads", "loop", "https://github.com/macanderson/stella/pull/1902",
      "An agent alternated a failing `cargo test` (same output each round) with a read_file of a different file each time; one interleaved call blinded all contiguous detectors and the turn spun to max_steps.",
      "repeat", "a different file read between runs; cargo timings",
      "The same test run fails the same way every other call, so its fifth occurrence is the repeat stop threshold even though a varying read sits between occurrences.")
def _() -> Run:
    r = Run("stella-1902")
    files = ["crates/stella-core/src/loop_detect.rs", "crates/stella-core/src/driver.rs", "crates/stella-core/src/goal.rs",
             "crates/stella-core/src/tools/mod.rs", "crates/stella-core/src/config.rs", "crates/stella-core/src/session.rs",
             "crates/stella-core/tests/loop_detect.rs"]
    for i, f in enumerate(files):
        run = r.rnd.uniform(0.31, 0.48)
        out = ("running 18 tests\ntest loop_detect::tests::short_cycle_two_calls ... ok\n"
               "test loop_detect::tests::resumes_after_progress ... FAILED\n\nfailures:\n\n"
               "---- loop_detect::tests::resumes_after_progress stdout ----\nthread 'loop_detect::tests::resumes_after_progress' panicked at crates/stella-core/src/loop_detect.rs:311:9:\n"
               "expected no verdict, got Some(ExactRepeat { count: 3 })\n\n"
               f"test result: FAILED. 17 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in {run:.2f}s\n")
        r.add("bash", {"command": "cargo test -p stella-core loop_detect"}, {"exit_code": 101, "stdout": out}, ok=False)
        if i == 4:
            r.mark()
        r.add("read_file", {"path": f, "offset": 1, "limit": 60},
              "\n".join(f"{n:>5}\t// {f.rsplit('/', 1)[-1]} line {n}" for n in range(1, 7)))
    return r


@case(14, "localagi-silent-command-rerun", "loop", "https://github.com/mudler/LocalAGI/pull/158",
      "When a command produced no output, agents frequently thought it never ran and got stuck running the same command again, although it had succeeded.",
      "repeat", "none (exact repeats of an empty success)",
      "The same command returns the same empty success every time, so the fifth call is the repeat stop threshold.")
def _() -> Run:
    r = Run("localagi-158")
    r.add("ssh_command", {"host": "web-1", "command": "sudo caddy validate --config /etc/caddy/Caddyfile"},
          "2025/05/15 09:12:44.118 INFO using config from file\nValid configuration\n")
    for i in range(7):
        r.add("ssh_command", {"host": "web-1", "command": "sudo systemctl reload caddy"}, "")
        if i == 4:
            r.mark()
    return r


@case(15, "stella-paging-sweep-wraps", "loop", "https://github.com/macanderson/stella/issues/4034",
      "A model paged through one file in 40-line reads, ran off the end, wrapped to offset 1 and swept again with windows shifted ~20 lines from the first pass: 164 reads, $7.83, no detection, since no output was byte-identical.",
      "no_progress", "windows shifted by 20 lines: every line already returned, never the same window",
      "The first pass brings new lines; after the wrap every window only re-reads lines already returned, so the sixth such read is the no_progress stop threshold.")
def _() -> Run:
    r = Run("stella-4034")
    total = 400
    words = ["session_scroll", "viewport", "deck", "render", "layout", "focus", "cursor", "pane", "style", "offset"]
    src = []
    for n in range(1, total + 1):
        w1, w2 = words[n % 10], words[(n * 7) % 10]
        src.append(f"    let {w1}_{n} = self.{w2}.get({n % 13});" if n % 5 else f"    // {w1}: keep {w2} in sync ({n})")

    def window(offset: int) -> str:
        lines = src[offset - 1: offset - 1 + 40]
        return "\n".join(f"{offset + k:>6}\t{line}" for k, line in enumerate(lines))

    reason = "Read the session_scroll field declaration and its docs"
    path = "crates/stella-tui/src/deck_ui.rs"
    for off in range(1, total, 40):
        r.add("read_file", {"path": path, "offset": off, "limit": 40, "reason": reason}, window(off))
    for i, off in enumerate(range(21, total - 40, 40)):
        r.add("read_file", {"path": path, "offset": off, "limit": 40, "reason": reason}, window(off))
        if i == 5:
            r.mark()
    return r


@case(16, "qwen-read-ignores-offset", "loop", "https://github.com/QwenLM/qwen-code/issues/2201",
      "Qwen Code's read tool kept returning the first 100-150 lines of a file whatever offset the agent asked for, and the agent re-read them over and over.",
      "no_progress", "offset/limit change every call; the truncation notice's numbers change; the lines returned are a subset of lines already seen",
      "After the first 150 lines have been returned, every read brings only lines already seen, so the sixth such read is the no_progress stop threshold.")
def _() -> Run:
    r = Run("qwen-2201")
    path = "/home/dev/svc/app/handlers/orders.py"
    code = [f"def handler_{n}(req):" if n % 9 == 1 else f"    step_{n} = req.get('f{n % 17}')" for n in range(1, 813)]

    def read(limit: int) -> str:
        head = f"[File content truncated: showing lines 1-{limit} of 812 total lines. Use offset/limit parameters to view more.]\n"
        return head + "\n".join(code[:limit])

    plan = [(0, 100, 100), (400, 100, 100), (400, 150, 150), (500, 50, 50), (450, 100, 100), (600, 150, 150),
            (420, 80, 80), (700, 100, 100), (380, 120, 120), (410, 60, 60), (390, 100, 100), (640, 150, 150)]
    for i, (off, lim, shown) in enumerate(plan):
        r.add("read_file", {"absolute_path": path, "offset": off, "limit": lim}, read(shown))
        if i == 8:
            r.mark()
    return r


@case(17, "agenticseek-revisits-same-urls", "loop", "https://github.com/Fosowl/agenticSeek/issues/146",
      "While researching, the browser agent kept navigating back and forth among the same handful of result URLs ('Going back to results. Still 7'), never finishing.",
      "no_progress", "irregular revisit order among a few pages",
      "After the last new page, every call is a revisit or a return to the same results list, so the sixth such call is the no_progress stop threshold.")
def _() -> Run:
    r = Run("agenticseek-146")
    pages = {
        "https://jsonld.com/web-page/": "WebPage Schema - JSON-LD. The WebPage type describes a web page. Properties: breadcrumb, lastReviewed, mainContentOfPage...",
        "https://ignitevisibility.com/everything-to-know-about-json-ld-for-seo/": "Everything to Know About JSON-LD for SEO. JSON-LD is a lightweight linked data format... Table of contents: What is JSON-LD, Why it matters...",
        "https://technicalseo.com/tools/schema-markup-generator/": "Schema Markup Generator (JSON-LD). Which Schema.org markup would you like to create? Article, Breadcrumb, Event, FAQ Page...",
        "https://jsonld-examples.com/": "JSON-LD Examples. Copy-paste examples of structured data for Organization, LocalBusiness, Product, Recipe...",
    }
    back = "Going back to results. Still 7 results to check."
    urls = list(pages)
    order = [urls[0], urls[1], None, urls[1], urls[2], None, urls[1], None, urls[3], None, urls[1], None, urls[1],
             urls[3], None, urls[1], None]
    marked = None
    for i, u in enumerate(order):
        if u is None:
            r.add("go_back", {}, back)
        else:
            r.add("navigate", {"url": u}, pages[u])
        if i == 8:
            marked = i + 6
        if marked is not None and i == marked:
            r.mark()
    return r


@case(18, "alanwest-kb-search-reworded", "loop", "https://dev.to/alanwest/why-your-ai-agent-loops-forever-and-how-to-break-the-cycle-12ia",
      "A support-triage ReAct agent called search_knowledge_base 73 times in a row with slightly different queries, burning 47,000 tokens without deciding to stop.",
      "no_progress", "reworded query every call; the same articles re-ranked with new scores",
      "From the third call on the reworded queries return only articles already returned, so the sixth such call is the no_progress stop threshold.")
def _() -> Run:
    r = Run("alanwest-kb")
    arts = [("KB-1042", "Resetting two-factor authentication"), ("KB-0977", "Account locked after failed logins"),
            ("KB-1120", "Changing the account email address"), ("KB-0815", "Recovering access without your phone"),
            ("KB-1301", "Login loop after password reset"), ("KB-0660", "Browser cookies and sign-in problems")]
    queries = ["user cannot log in after resetting 2FA", "login fails after two factor reset", "2fa reset then locked out",
               "can't sign in after changing authenticator app", "locked out after 2FA reset what to do",
               "two-factor authentication reset login problem", "sign in loop after resetting MFA", "lost access after 2fa change",
               "authentication fails post 2FA reset", "login error after mfa reset steps", "account access after 2FA reset"]
    for i, q in enumerate(queries):
        if i == 0:
            hits = r.rnd.sample(arts[:5], 5)
        elif i == 1:
            hits = arts[5:] + r.rnd.sample(arts[:5], 4)
        else:
            hits = r.rnd.sample(arts, 5)
        results = [{"id": a, "title": t, "score": round(r.rnd.uniform(0.61, 0.89), 3)} for a, t in hits]
        results.sort(key=lambda h: -h["score"])
        r.add("search_knowledge_base", {"query": q, "top_k": 5}, {"results": results})
        if i == 7:
            r.mark()
    return r


@case(19, "hermes-web-search-spiral", "loop", "https://github.com/Lexus2016/hermes-agent-evolution/issues/1206",
      "The agent looped on web_search, reformulating the same query up to 19 consecutive times in one session without ever extracting a page or synthesizing an answer.",
      "no_progress", "reworded query every call; overlapping hits in a new order",
      "Once the second search has surfaced the pages, later reformulations return only those pages again, so the sixth such search is the no_progress stop threshold.")
def _() -> Run:
    r = Run("hermes-1206")
    hits = [("https://docs.python.org/3/library/asyncio-task.html#asyncio.TaskGroup", "Coroutines and Tasks — Python 3.13 documentation", "TaskGroup: an asynchronous context manager holding a group of tasks..."),
            ("https://peps.python.org/pep-0654/", "PEP 654 – Exception Groups and except*", "This document proposes language extensions that allow programs to raise and handle multiple unrelated exceptions..."),
            ("https://stackoverflow.com/questions/75250788/how-to-cancel-all-tasks-in-a-taskgroup", "How to cancel all tasks in a TaskGroup - Stack Overflow", "When one task fails, TaskGroup cancels the remaining tasks..."),
            ("https://superfastpython.com/asyncio-taskgroup/", "Asyncio TaskGroup in Python", "The asyncio.TaskGroup class was added in Python 3.11..."),
            ("https://github.com/python/cpython/issues/101581", "TaskGroup cancellation semantics · Issue #101581", "Discussion of how TaskGroup handles cancellation of the parent task..."),
            ("https://realpython.com/python311-exception-groups/", "Python 3.11 Preview: Task and Exception Groups", "Task groups give you a safer way to run concurrent tasks...")]
    queries = ["asyncio TaskGroup cancel remaining tasks when one fails", "python taskgroup cancellation behavior",
               "TaskGroup exception one task fails others cancelled", "asyncio.TaskGroup cancel all on error python 3.11",
               "how does TaskGroup handle exceptions", "python asyncio taskgroup error propagation",
               "taskgroup cancellation semantics python", "TaskGroup vs gather cancellation", "asyncio task group failure cancels siblings",
               "python 3.12 TaskGroup exception handling cancel", "TaskGroup cancel scope python docs", "asyncio TaskGroup what happens when a task raises"]
    for i, q in enumerate(queries):
        if i == 0:
            pick = r.rnd.sample(hits[:4], 4)
        elif i == 1:
            pick = hits[4:] + r.rnd.sample(hits[:4], 2)
        else:
            pick = r.rnd.sample(hits, 4)
        r.add("web_search", {"query": q, "limit": 4},
              {"success": True, "data": {"web": [{"url": u, "title": t, "description": d} for u, t, d in pick]}})
        if i == 7:
            r.mark()
    return r


@case(20, "gemini-google-search-no-results", "loop", "https://github.com/google-gemini/gemini-cli/issues/28037",
      "For a query with no relevant results, gemini-cli kept issuing google_web_search calls, reformulating or retrying instead of concluding there was nothing to find.",
      "no_progress", "reworded query (Korean/English) echoed in the result header; same two weak sources in a new order",
      "Every search after the first returns the same two irrelevant sources under a header that echoes the new query, so the sixth such search is the no_progress stop threshold.")
def _() -> Run:
    r = Run("gemini-28037", "gemini")
    queries = ["한국투자증권 etf_code.mst file format", "etf_code.mst 파일 포맷", "KIS Developers etf_code.mst layout",
               "한국투자증권 마스터파일 etf_code.mst 구조", "etf_code.mst column specification", "한국투자증권 ETF 종목코드 마스터 파일 형식",
               "KIS open API master file etf_code.mst fields", "etf_code.mst 필드 정의", "kis_etf_code mst parse python"]
    srcs = [("KIS Developers - 종목정보파일", "https://apiportal.koreainvestment.com/apiservice-category"),
            ("koreainvestment/open-trading-api - GitHub", "https://github.com/koreainvestment/open-trading-api")]
    for i, q in enumerate(queries):
        a, b = srcs if r.rnd.random() < 0.5 else srcs[::-1]
        text = (f"Web search results for \"{q}\":\n\nI could not find a specification of the etf_code.mst layout. "
                f"The KIS developer portal lists master files for download but does not document their columns[1]. "
                f"The open-trading-api repository contains sample code for other master files[2].\n\nSources:\n[1] {a[0]} ({a[1]})\n[2] {b[0]} ({b[1]})")
        r.add("google_web_search", {"query": q}, {"llmContent": text, "returnDisplay": f"Search results for \"{q}\" returned."})
        if i == 6:
            r.mark()
    return r


@case(21, "weknora-fetch-fail-rewrite", "loop", "https://github.com/Tencent/WeKnora/pull/2308",
      "Web fetch failures triggered unlimited search-query rewrites: KB retrieval -> web_search -> web_fetch failure -> rewritten web_search -> failure..., 21 tool calls and ~156 s before a final answer.",
      "no_progress", "rewritten query each round; same URLs re-ranked; timeout errors with elapsed ms",
      "From the second round on each rewritten search returns the same URLs and each fetch fails the same way, so the sixth call in a row with nothing new is the no_progress stop threshold.")
def _() -> Run:
    r = Run("weknora-2308")
    r.add("knowledge_search", {"query": "2026 年 最低工资 标准 上海", "top_k": 5}, {"chunks": [], "total": 0})
    urls = ["https://www.shanghai.gov.cn/nw12344/20260612/minimum-wage.html", "https://rsj.sh.gov.cn/tgzjj_17209/20260612/t0035_1420188.html",
            "https://www.gov.cn/zhengce/2026-06/12/content_7031920.htm"]
    queries = ["上海 2026 最低工资标准", "上海市 最低工资 调整 2026年7月", "Shanghai minimum wage 2026", "上海最低月工资标准 2026 人社局",
               "上海 小时最低工资 2026"]
    n = 0
    for q in queries:
        top = urls[:2]
        r.rnd.shuffle(top)
        order = top + urls[2:]
        r.add("web_search", {"query": q, "max_results": 3}, {"results": [{"url": u, "title": "上海市最低工资标准调整通知"} for u in order]})
        n += 1
        if n == 9:
            r.mark()
        for u in order[:2]:
            ms = r.rnd.randrange(15001, 15090)
            r.add("web_fetch", {"url": u}, {"error": f"fetch {u}: context deadline exceeded (Client.Timeout exceeded while awaiting headers) after {ms}ms"}, ok=False)
            n += 1
            if n == 9:
                r.mark()
    return r


@case(22, "stella-grep-regex-reshuffled", "loop", "https://github.com/macanderson/stella/pull/1361",
      "A model reshuffled a regex alternation in grep calls 38 times, each input different and each output byte-identical, before the old detector caught it by accident.",
      "no_progress", "the same alternatives in a new order each call",
      "Every reordering of the same alternatives returns the same matches, so the sixth call after the first is the no_progress stop threshold.")
def _() -> Run:
    r = Run("stella-1361")
    alts = ["session_scroll", "scroll_offset", "viewport_top", "first_visible_row"]
    out = ("crates/stella-tui/src/deck_ui.rs:118:    session_scroll: usize,\n"
           "crates/stella-tui/src/deck_ui.rs:119:    viewport_top: usize,\n"
           "crates/stella-tui/src/deck_ui.rs:642:        self.session_scroll = self.session_scroll.saturating_sub(1);\n")
    seen = set()
    i = 0
    while i < 10:
        r.rnd.shuffle(alts)
        pattern = "|".join(alts)
        if pattern in seen:
            continue
        seen.add(pattern)
        r.add("grep", {"pattern": pattern, "path": "crates/", "output_mode": "content", "-n": True}, out)
        if i == 6:
            r.mark()
        i += 1
    return r


@case(23, "shaft-subagent-reasked-reworded", "loop", "https://github.com/ShaftHQ/SHAFT_ENGINE/issues/4083",
      "A completed subagent was re-invoked again and again with the same instruction rephrased ('Fourth time asking the same thing in different words'), declining each time on charter grounds; ~85k tokens per cycle.",
      "repeat", "a new preamble each time; the refusal's opening line, token count and duration vary",
      "The same task re-asked in new words gets the same refusal, so the fifth equivalent delegation is the repeat stop threshold (the report shows four cycles and counting; the recording continues).")
def _() -> Run:
    r = Run("shaft-4083", "anthropic")
    ask = ("manage and delegate the full open-bug backlog, under a 4-agent cap; report which bugs each agent takes")
    preambles = ["", "Following up on the owner priority instruction: ", "Re-sending with more context. The owner wants you to ",
                 "Priority directive from the owner, please act on it now: ", "To be clear, this is authorised. Your task is to ",
                 "Last attempt, restating the request plainly: ", "Owner escalation: "]
    openers = ["", "Second time asking. ", "Third time asking. ", "Fourth time asking the same thing in different words. ",
               "Fifth time. ", "Same request again. ", "Again the same request. "]
    for i in range(7):
        tokens = r.rnd.randrange(85000, 90000)
        secs = r.rnd.randrange(190, 260)
        result = (f"{openers[i]}I'm declining: my charter is PR #4049, which merged at 06:53Z. Managing the open-bug backlog "
                  "is outside it and needs the main thread's decision, not mine. Nothing was changed.\n"
                  f"agentId: a7f3c19e (subagent_tokens: {tokens:,} · tool_uses: 25 · duration: {secs // 60}m {secs % 60}s)")
        r.add("Task", {"subagent_type": "general-purpose", "description": "Backlog delegation", "prompt": preambles[i] + ask}, result)
        if i == 4:
            r.mark()
    return r


@case(24, "swarm-handoff-ping-pong", "loop", "https://github.com/langchain-ai/langgraph-swarm-py/issues/6",
      "With create_handoff_tool two agents can keep handing off to each other until the graph's recursion limit; only prompt engineering prevents it.",
      "cycle", "none (exact ping-pong)",
      "Each agent hands the conversation straight back with the same result, so the third repetition of the two-call block is the cycle stop threshold.")
def _() -> Run:
    r = Run("swarm-6")
    r.add("lookup_invoice", {"invoice_id": "INV-2291"}, {"invoice_id": "INV-2291", "status": "disputed", "amount": 129.0})
    for i in range(5):
        r.add("transfer_to_support_agent", {}, "Successfully transferred to support_agent")
        r.add("transfer_to_billing_agent", {}, "Successfully transferred to billing_agent")
        if i == 2:
            r.mark()
    return r


@case(25, "codex-echo-and-true", "loop", "https://github.com/openai/codex/issues/6970",
      "Codex CLI kept running `echo \"All set.\"`, `true`, `echo 'Done again.'`, `true`... and, in another session, `cd <repo> && true` over and over after a clean git status.",
      "no_progress", "each echo prints only its own argument; `true` prints nothing; durations vary",
      "After the git status every call either echoes its own text or prints nothing, so the sixth such call is the no_progress stop threshold.")
def _() -> Run:
    r = Run("codex-6970")
    repo = "/home/ginis/wastelite-suite/wastelite_frontend"

    def out(text: str) -> dict:
        return {"output": text, "metadata": {"exit_code": 0, "duration_seconds": round(r.rnd.uniform(0.0, 0.2), 1)}}

    r.add("shell", {"command": ["bash", "-lc", "git status -sb"], "workdir": repo}, out("## main...origin/main\n"))
    cmds = ["echo \"All set.\"", "true", "echo 'Done again.'", "true", "echo 'Final done'", "true",
            f"cd {repo} && true", f"cd {repo} && true", f"cd {repo} && true", f"cd {repo} && true"]
    for i, c in enumerate(cmds):
        text = c.split(" ", 1)[1].strip("\"'") + "\n" if c.startswith("echo") else ""
        r.add("shell", {"command": ["bash", "-lc", c], "workdir": repo}, out(text))
        if i == 5:
            r.mark()
    return r


@case(26, "codex-git-status-repeat", "loop", "https://github.com/openai/codex/issues/7049",
      "Codex CLI looped on `git status -sb` (same branch line every time), with one `git push` answering 'Everything up-to-date' between them.",
      "repeat", "duration_seconds in each result; one no-op push interleaved",
      "The same status command returns the same line every time and the interleaved push changed nothing, so the fifth status call is the repeat stop threshold.")
def _() -> Run:
    r = Run("codex-7049")
    repo = "/Users/florianm/Desktop/Projects/shop-web"

    def out(text: str) -> dict:
        return {"output": text, "metadata": {"exit_code": 0, "duration_seconds": round(r.rnd.uniform(0.0, 0.3), 1)}}

    status = "## feat/shadcn-migration...origin/feat/shadcn-migration\n"
    r.add("shell", {"command": ["bash", "-lc", f"cd {repo} && git status -sb"]}, out(status))
    r.add("shell", {"command": ["bash", "-lc", f"cd {repo} && git push origin feat/shadcn-migration"]}, out("Everything up-to-date\n"))
    for i in range(7):
        r.add("shell", {"command": ["bash", "-lc", f"cd {repo} && git status -sb"]}, out(status))
        if i == 3:
            r.mark()
    return r


@case(27, "gaia-search-twelve-times", "loop", "https://github.com/amd/gaia/issues/3943",
      "On a lookup task the agent searched for the same string twelve times, never found it, wrote no file, and every call returned status success.",
      "repeat", "elapsed_ms and files_scanned... only the timing changes",
      "The same search returns the same empty success every time, so the fifth call is the repeat stop threshold.")
def _() -> Run:
    r = Run("gaia-3943")
    for i in range(12):
        r.add("search_file_content", {"pattern": "Q3 operating margin", "directory": "C:\\Users\\dev\\Documents\\reports"},
              {"status": "success", "matches": [], "files_searched": 214, "elapsed_ms": r.rnd.randrange(31, 58)})
        if i == 4:
            r.mark()
    return r


@case(28, "superplane-empty-list-cycle", "loop", "https://github.com/superplanehq/superplane/issues/4123",
      "The agent looped over list_integration_resources, describe_trigger and list_components with identical or slightly varied arguments; responses were mostly empty ([]) and nothing stopped it.",
      "cycle", "slightly varied arguments (type spelling, page size) between rounds",
      "The three-call round brings the same empty answers every time, so its third repetition is the cycle stop threshold.")
def _() -> Run:
    r = Run("superplane-4123")
    variants = [({"integration": "github", "type": "repository"}, {"canvas_id": "cv_8f2e", "page_size": 50}),
                ({"integration": "github", "type": "repo"}, {"canvas_id": "cv_8f2e"}),
                ({"integration": "github", "type": "repository", "page_size": 100}, {"canvas_id": "cv_8f2e", "page_size": 100}),
                ({"integration": "GitHub", "type": "repository"}, {"canvas_id": "cv_8f2e", "page_size": 50}),
                ({"integration": "github", "type": "repositories"}, {"canvas_id": "cv_8f2e"})]
    for i, (res_args, comp_args) in enumerate(variants):
        r.add("list_integration_resources", res_args, [])
        r.add("describe_trigger", {"trigger_id": "trg_01HZX3"}, {"id": "trg_01HZX3", "kind": "github.push", "resources": [], "status": "unbound"})
        r.add("list_components", comp_args, [])
        if i == 2:
            r.mark()
    return r


@case(29, "claude-rereads-five-files", "loop", "https://github.com/anthropics/claude-code/issues/11487",
      "Claude Code read the same 5-6 files 10-15 times each, never moving from analysis to writing code; compaction made it forget and start another read cycle.",
      "no_progress", "a five-file cycle (longer than a two-to-four-call block)",
      "After the first pass every read returns a file already read, so the sixth re-read is the no_progress stop threshold.")
def _() -> Run:
    r = Run("cc-11487", "anthropic")
    files = [("src/app/dashboard/page.tsx", 428), ("src/lib/api/client.ts", 435), ("src/lib/api/types.ts", 373),
             ("src/components/ChartPanel.tsx", 211), ("src/hooks/useMetrics.ts", 158)]
    for rnd_ in range(3):
        for j, (f, n) in enumerate(files):
            body = "\n".join(f"{k:>6}→// {f} line {k}" for k in range(1, 9)) + f"\n... ({n} lines)"
            r.add("Read", {"file_path": f"/Users/divu/projects/metrics-web/{f}"}, body)
            if rnd_ == 2 and j == 0:
                r.mark()
    return r


@case(30, "claude-wasted-reread", "loop", "https://github.com/anthropics/claude-code/issues/64882",
      "The model re-read an unchanged file on later turns; the harness answered 'Wasted call — file unchanged since your last Read' and the model re-issued the same read, repeatedly.",
      "error_streak", "none (exact repeats of the rejection)",
      "The same read is rejected the same way every time, so the fourth rejection in a row is the error_streak stop threshold.")
def _() -> Run:
    r = Run("cc-64882", "anthropic")
    r.add("Read", {"file_path": "/repo/src/billing/invoice.py"}, "     1→from decimal import Decimal\n     2→\n     3→class Invoice:\n")
    for i in range(7):
        r.add("Read", {"file_path": "/repo/src/billing/invoice.py"},
              "Wasted call — file unchanged since your last Read. Refer to that earlier tool_result instead.", ok=False)
        if i == 3:
            r.mark()
    return r


@case(31, "gemini-read-edit-cycle", "loop", "https://github.com/google-gemini/gemini-cli/issues/3926",
      "Gemini CLI kept re-reading a file and retrying the same edit that failed with 'expected 1 occurrence(s) but found 2', apologising that it was stuck in a loop.",
      "cycle", "none (exact read/edit cycle)",
      "The read returns the same file and the edit fails the same way every round, so the third repetition of the pair is the cycle stop threshold.")
def _() -> Run:
    r = Run("gemini-3926", "gemini")
    content = ("const getStatusColor = (s: string) => s === 'done' ? 'green' : 'gray';\n\nexport default function AIDocuments() {\n"
               "  const getStatusColor = (s: string) => s === 'done' ? 'green' : 'gray';\n  return <List color={getStatusColor} />;\n}\n")
    edit = {"file_path": "C:\\dev\\app\\src\\pages\\AIDocuments.tsx",
            "old_string": "const getStatusColor = (s: string) => s === 'done' ? 'green' : 'gray';\n", "new_string": ""}
    for i in range(5):
        r.add("read_file", {"absolute_path": "C:\\dev\\app\\src\\pages\\AIDocuments.tsx"}, content)
        r.add("replace", edit, {"error": "Failed to edit, expected 1 occurrence(s) but found 2."}, ok=False)
        if i == 2:
            r.mark()
    return r


@case(32, "roo-apply-diff-missing-function", "loop", "https://github.com/RooCodeInc/Roo-Code/issues/3198",
      "Roo went into an infinite loop re-reading a file and trying to apply edits to a caching function that did not exist yet; every apply failed.",
      "error_streak", "a slightly different diff each attempt; similarity percentage and best-match line in each error",
      "The edit keeps failing for the same reason (the function is not in the file) with a re-read between tries, so the fourth failed apply is the error_streak stop threshold.")
def _() -> Run:
    r = Run("roo-3198")
    content = "   1 | import { fetchRates } from './api'\n   2 | \n   3 | export async function getRates(base: string) {\n   4 |   return fetchRates(base)\n   5 | }\n"
    for i in range(6):
        r.add("read_file", {"path": "src/rates.ts"}, content)
        timeout = ["ttlMs", "TTL_MS", "cacheTtl", "ttl", "CACHE_TTL_MS", "ttlMillis"][i]
        diff = (f"<<<<<<< SEARCH\n:start_line:{r.rnd.randrange(6, 14)}\n-------\n"
                f"export function withCache(fn, {timeout} = 60_000) {{\n  const cache = new Map()\n=======\n"
                "export function withCache(fn) {\n  const cache = new Map()\n>>>>>>> REPLACE")
        pct = r.rnd.randrange(38, 61)
        line = r.rnd.randrange(1, 5)
        r.add("apply_diff", {"path": "src/rates.ts", "diff": diff},
              f"Error: No sufficiently similar match found at line {line} ({pct}% similar, needs 100%)\n\nDebug Info:\n- Similarity Score: {pct}%\n"
              "- Required Threshold: 100%\n- Search Range: start to end\n- Tried both standard and aggressive line number stripping\n"
              "- Tip: Use the read_file tool to get the latest content of the file before attempting to use the apply_diff tool again",
              ok=False)
        if i == 3:
            r.mark()
    return r


@case(33, "openclaw-edit-reports-success", "loop", "https://github.com/openclaw/openclaw/issues/72847",
      "The edit tool reported success without changing the file; the agent kept re-applying the same edit and re-reading the unchanged content in an infinite loop.",
      "cycle", "none (exact edit/read cycle)",
      "The same edit 'succeeds' and the same unchanged file comes back every round, so the third repetition of the pair is the cycle stop threshold.")
def _() -> Run:
    r = Run("openclaw-72847")
    edit = {"path": "site/index.html", "oldText": "<footer>© 2025 Lumen Studio · v1.8</footer>", "newText": "<footer>© 2026 Lumen Studio · v1.9</footer>"}
    page = "<main>\n  <h1>Lumen Studio</h1>\n</main>\n<footer>© 2025 Lumen Studio · v1.8</footer>\n"
    for i in range(5):
        r.add("edit", edit, "Successfully replaced text in site/index.html.")
        r.add("read", {"path": "site/index.html"}, page)
        if i == 2:
            r.mark()
    return r


@case(34, "localharness-identical-rewrites", "loop", "https://github.com/ahwurm/localharness/issues/80",
      "A subject model rewrote md5-identical CSV content to the same path two more times in one turn and three times in a later one; the write tool answered the same success line each time.",
      "repeat", "one read interleaved between the two bursts",
      "The same write of the same bytes returns the same success every time and the read between bursts shows nothing new, so the fifth identical write is the repeat stop threshold.")
def _() -> Run:
    r = Run("localharness-80")
    csv = "region,q1,q2,q3\nnorth,1200,1340,1295\nsouth,980,1010,1122\nwest,1410,1388,1502\n"
    args = {"path": "out/summary.csv", "content": csv, "mode": "overwrite"}
    done = f"Written {len(csv.encode())} bytes to out/summary.csv"
    for _ in range(3):
        r.add("write", args, done)
    r.add("read", {"path": "out/summary.csv"}, csv)
    for i in range(4):
        r.add("write", args, done)
        if i == 1:
            r.mark()
    return r


@case(35, "browser-use-scroll-at-bottom", "loop", "https://github.com/browser-use/browser-use/issues/191",
      "browser-use kept issuing scroll_down step after step ('Scrolled down the page by one page'), memory 'Scrolled down the page', next goal 'scroll down again', with nothing changing.",
      "repeat", "none (exact repeats)",
      "The same scroll gets the same answer every step, so the fifth is the repeat stop threshold.")
def _() -> Run:
    r = Run("browser-use-191")
    r.add("go_to_url", {"url": "https://news.ycombinator.com/item?id=42311019"}, "🔗  Navigated to https://news.ycombinator.com/item?id=42311019")
    r.add("extract_content", {"goal": "find the top comment about pricing"}, "📄  Extracted from page\n: The page shows 214 comments; no comment mentions pricing in the visible part.")
    for i in range(10):
        r.add("scroll_down", {}, "🔍  Scrolled down the page by one page")
        if i == 4:
            r.mark()
    return r


# ---------------------------------------------------------------------------------------------
# Legitimate look-alikes
# ---------------------------------------------------------------------------------------------

@case(36, "openhands-continue-long-command", "legit", "https://github.com/OpenHands/OpenHands/issues/10350",
      "An agent continues a long-running command by sending an empty command; three in a row were flagged as 'stuck in loop' and the conversation was stopped (PR #10750 then allowed more).",
      "polling", "identical empty command; each answer carries the next lines of the install log",
      "Each empty command returns new output from the running install (one quiet poll included) until it finishes, so it is waiting that advances, not a loop.")
def _() -> Run:
    r = Run("openhands-10350")
    r.add("execute_bash", {"command": "pip install -r requirements.txt", "timeout": 30},
          "Collecting torch==2.5.1 (from -r requirements.txt (line 1))\n  Downloading torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl (906.4 MB)\n"
          "[The command timed out after 30 seconds. You may wait longer to see additional output by sending empty command '', send other commands to interact with the current process, or send keys to interrupt/kill the command.]")
    chunks = ["     ━━━━━━━━━━━━━━━━━━━━ 214.0/906.4 MB 41.2 MB/s eta 0:00:17",
              "     ━━━━━━━━━━━━━━━━━━━━ 611.9/906.4 MB 44.8 MB/s eta 0:00:07",
              "     ━━━━━━━━━━━━━━━━━━━━ 906.4/906.4 MB 43.0 MB/s eta 0:00:00\nCollecting numpy==2.1.3 (from -r requirements.txt (line 2))\n  Downloading numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.whl (16.0 MB)",
              "",
              "Installing collected packages: numpy, torch, transformers",
              "Successfully installed numpy-2.1.3 torch-2.5.1 transformers-4.46.3\n[The command completed with exit code 0.]"]
    for c in chunks:
        tail = "" if "exit code" in c else "\n[The command has no new output after 30 seconds. You may wait longer to see additional output by sending empty command '', send other commands to interact with the current process, or send keys to interrupt/kill the command.]"
        r.add("execute_bash", {"command": "", "is_input": "false"}, (c + tail).lstrip("\n"))
    r.add("execute_bash", {"command": "python -c 'import torch; print(torch.__version__)'"}, "2.5.1+cu124\n[The command completed with exit code 0.]")
    return r


@case(37, "openhands-sleep-then-tail", "legit", "https://github.com/OpenHands/OpenHands/issues/5355",
      "With a 2-minute command timeout, agents must repeatedly sleep while waiting for long builds; loop detection started killing agents that were only waiting.",
      "polling", "identical `sleep 60` calls with empty output between log tails",
      "Every tail of the build log shows new tasks until BUILD SUCCESSFUL, so the sleeps are waiting on a process that advances.")
def _() -> Run:
    r = Run("openhands-5355")
    r.add("execute_bash", {"command": "nohup ./gradlew build > build.log 2>&1 &"}, "[1] 48211\n[Command finished with exit code 0]")
    tails = ["> Task :core:compileJava\n> Task :core:processResources\n> Task :core:classes",
             "> Task :core:test\n> Task :api:compileJava\n> Task :api:classes",
             "> Task :api:test\n> Task :web:compileKotlin",
             "> Task :web:test\n> Task :web:bootJar",
             "> Task :build\n\nBUILD SUCCESSFUL in 6m 12s\n41 actionable tasks: 41 executed"]
    for t in tails:
        r.add("execute_bash", {"command": "sleep 60"}, "[Command finished with exit code 0]")
        r.add("execute_bash", {"command": "tail -n 5 build.log"}, t + "\n[Command finished with exit code 0]")
    return r


@case(38, "gemini-cli-data-blocks", "legit", "https://github.com/google-gemini/gemini-cli/issues/7950",
      "Analysing large data by loading and reading block after block was halted by 'A potential loop was detected', although every read was a different block.",
      "batch", "the same tool on a new file each call",
      "Each call reads a different block with different rows: batch work that brings new data every time.")
def _() -> Run:
    r = Run("gemini-7950", "gemini")
    r.add("run_shell_command", {"command": "ls data/ | head -20"}, "Command: ls data/ | head -20\nOutput: " + " ".join(f"ventas_2025_part{i:02d}.csv" for i in range(1, 10)))
    for i in range(1, 10):
        rows = "\n".join(f"{i:02d}-{k:04d},{r.rnd.choice(['MX', 'CO', 'CL', 'PE'])},{r.rnd.randrange(100, 9999)}.{r.rnd.randrange(100):02d}" for k in range(1, 6))
        r.add("read_file", {"absolute_path": f"/Users/david/analisis/data/ventas_2025_part{i:02d}.csv"}, "id,pais,monto\n" + rows)
    return r


@case(39, "stella-read-output-poll", "legit", "https://github.com/macanderson/stella/issues/359",
      "Three identical read_output polls of a still-running build tripped ExactRepeat, and the correct alternation read_output / bash sleep 5 tripped ShortCycle 30 s into a 10-minute build, though every poll returned new bytes.",
      "polling", "identical poll and sleep arguments; the output grows each poll",
      "Every poll returns new build output until the process exits, so the alternation is waiting that advances.")
def _() -> Run:
    r = Run("stella-359")
    r.add("start_process", {"command": "cargo build --release", "cwd": "/srv/tb2"}, {"handle": "proc-7", "status": "running"})
    crates = ["serde v1.0.215", "tokio v1.41.1", "hyper v1.5.1", "axum v0.7.9", "tb2-core v0.3.0", "tb2-cli v0.3.0"]
    for i, c in enumerate(crates):
        r.add("read_output", {"handle": "proc-7"}, {"status": "running", "new_output": f"   Compiling {c}\n"})
        r.add("bash", {"command": "sleep 5"}, "")
    r.add("read_output", {"handle": "proc-7"}, {"status": "exited (code 0)", "new_output": "    Finished `release` profile [optimized] target(s) in 9m 41s\n"})
    return r


@case(40, "qwen-task-list-board-changes", "legit", "https://github.com/QwenLM/qwen-code/pull/9492",
      "For task_list, identical arguments do not imply an identical result: teammates mutate the shared board between calls, so productive polling was halted by the consecutive-identical guard.",
      "polling", "identical task_list arguments; the board changes between calls",
      "Each poll shows tasks moving on the shared board (claimed, done, added), so repeated identical calls observe real progress.")
def _() -> Run:
    r = Run("qwen-9492")
    states = [
        [("T1", "in_progress", "alice"), ("T2", "pending", None), ("T3", "pending", None)],
        [("T1", "in_progress", "alice"), ("T2", "in_progress", "bob"), ("T3", "pending", None)],
        [("T1", "completed", "alice"), ("T2", "in_progress", "bob"), ("T3", "pending", None)],
        [("T1", "completed", "alice"), ("T2", "in_progress", "bob"), ("T3", "in_progress", "alice"), ("T4", "pending", None)],
        [("T1", "completed", "alice"), ("T2", "completed", "bob"), ("T3", "in_progress", "alice"), ("T4", "in_progress", "bob")],
        [("T1", "completed", "alice"), ("T2", "completed", "bob"), ("T3", "completed", "alice"), ("T4", "in_progress", "bob")],
        [("T1", "completed", "alice"), ("T2", "completed", "bob"), ("T3", "completed", "alice"), ("T4", "completed", "bob")],
    ]
    for s in states:
        r.add("task_list", {}, {"tasks": [{"id": t, "status": st, "owner": o} for t, st, o in s]})
    return r


@case(41, "hermes-pipefail-exit-one", "legit", "https://github.com/NousResearch/hermes-agent/pull/54637",
      "Eight consecutive terminal calls that all produced valid output (grep results, log headers, a dry run) reported exit_code 1 because of set -euo pipefail with grep/head, and the same-tool-failure guard halted the turn.",
      "error_streak", "every result carries exit_code 1 despite valid output",
      "Each command is different and returns new, valid output; the non-zero exit code is grep/head under pipefail, not a failure, so the run must not be stopped.")
def _() -> Run:
    r = Run("hermes-54637")
    cmds = [("set -euo pipefail; grep -n 'lr_schedule' configs/gw_exp7.yaml | head -3", "12:lr_schedule: cosine\n13:lr_schedule_warmup: 500\n"),
            ("set -euo pipefail; head -n 4 runs/gw_exp7/train.log", "step,loss,lr,grad_norm\n0,7.912,0.0,12.44\n50,6.105,6.0e-05,3.91\n100,5.480,1.2e-04,2.87\n"),
            ("set -euo pipefail; grep -c 'nan' runs/gw_exp7/train.log | head -1", "0\n"),
            ("set -euo pipefail; ls runs/gw_exp7/ckpt | sort -V | tail -n 3 | head -3", "step_18000.pt\nstep_19000.pt\nstep_20000.pt\n"),
            ("set -euo pipefail; grep -m1 -n 'eval_loss' runs/gw_exp7/eval.log | head -1", "41:eval_loss=3.114 step=20000\n"),
            ("set -euo pipefail; python tools/resume.py --ckpt step_20000.pt --dry-run | head -5", "resume plan: load step_20000.pt\noptimizer: AdamW (restored)\nscheduler: cosine @ 20000/60000\n=== EXIT: 0 ===\n"),
            ("set -euo pipefail; grep -n 'world_size' configs/gw_exp7.yaml | head -2", "27:world_size: 8\n"),
            ("set -euo pipefail; nvidia-smi --query-gpu=memory.used --format=csv | head -3", "memory.used [MiB]\n71234 MiB\n70988 MiB\n")]
    for c, o in cmds:
        r.add("terminal", {"command": c}, {"output": o, "exit_code": 1, "error": None})
    return r


@case(42, "openclaw-cron-audit-no-match", "legit", "https://github.com/openclaw/openclaw/pull/111574",
      "Cron and agent runs marked successful exec commands with semantic non-zero exits (grep exiting 1 on no match, an audit script exiting 1 to mean 'alert needed') as failed, giving false failure diagnostics.",
      "no_progress", "distinct checks, most answering an empty stdout with exit code 1 (no match)",
      "Each call is a different check whose empty 'no match' answer is the finding itself, and the run ends with a report, so it is batch work, not a loop.")
def _() -> Run:
    r = Run("openclaw-111574")
    checks = [("grep -i 'panic' /var/log/app/2026-07-19.log", "", 1),
              ("grep -l 'PRIVATE KEY' /etc/app/*.yml", "", 1),
              ("grep -c 'HTTP/1.1\" 5' /var/log/nginx/access.log.1", "0\n", 1),
              ("grep -i 'oom-killer' /var/log/kern.log", "", 1),
              ("find /var/backups -name '*.tar.gz' -mtime -1", "/var/backups/app-2026-07-19.tar.gz\n", 0),
              ("/opt/audit/check_disk.sh", "ALERT: /var at 91% (threshold 90%)\n", 1)]
    for c, o, code in checks:
        r.add("exec", {"command": c}, {"status": "completed", "stdout": o, "exitCode": code})
    r.add("write", {"path": "reports/audit-2026-07-19.md", "content": "# Daily audit 2026-07-19\n- no panics, no leaked keys, no 5xx, no OOM\n- backup present\n- ALERT: /var at 91%\n"},
          "Wrote 118 bytes to reports/audit-2026-07-19.md")
    return r


@case(43, "agent-toolkit-workspace-bootstrap", "legit", "https://github.com/ulises-jeremias/agent-toolkit/issues/208",
      "The harness bootstrap an agent runs for a fresh workspace is a row of silent commands: mkdir -p repos/github.com, mkdir -p projects, echo 'repos/' >> .gitignore, echo 'projects/' >> .gitignore.",
      "no_progress", "distinct side-effect commands, each answering an empty success",
      "Each command does a different thing and succeeds silently, as shell commands do; empty answers from distinct side effects are not a loop.")
def _() -> Run:
    r = Run("agent-toolkit-208")
    cmds = ["mkdir -p repos/github.com", "mkdir -p projects", "echo 'repos/' >> .gitignore", "echo 'projects/' >> .gitignore",
            "git init -q", "git config user.email bot@example.com", "touch projects/.keep", "git add .gitignore projects/.keep"]
    for c in cmds:
        r.add("bash", {"command": c, "cwd": "/home/ulises/workspace"}, {"stdout": "", "stderr": "", "exit_code": 0})
    r.add("bash", {"command": "git status --short", "cwd": "/home/ulises/workspace"}, {"stdout": "A  .gitignore\nA  projects/.keep\n", "stderr": "", "exit_code": 0})
    return r


@case(44, "heddle-rerun-verification", "legit", "https://github.com/roackb2/heddle/issues/7",
      "The runtime hard-blocked repeated identical tool calls after two attempts, which broke rerunning the same verification command after each code change while diagnosing web search.",
      "no_progress", "identical test command after each edit; fewer failures each run",
      "Each rerun follows an edit and shows fewer failures (3, 2, 1, 0): a test-fix-test cycle that makes progress.")
def _() -> Run:
    r = Run("heddle-7")
    fails = [["oauth token refresh", "search returns results", "search respects limit"],
             ["search returns results", "search respects limit"], ["search respects limit"], []]
    edits = [("src/search/oauth.ts", "refresh before expiry"), ("src/search/client.ts", "send bearer header"), ("src/search/client.ts", "pass limit param")]
    for i, f in enumerate(fails):
        dur = r.rnd.randrange(900, 1600)
        lines = "\n".join(f"  ✗ web-search > {t}" for t in f)
        summary = f"Tests  {len(f)} failed | {11 - len(f)} passed (11)" if f else "Tests  11 passed (11)"
        r.add("run_command", {"command": "npx vitest run tests/web-search.test.ts"},
              {"exit_code": 1 if f else 0, "output": f" RUN  v2.1.8 /repo\n\n{lines}\n\n Test Files  1 {'failed' if f else 'passed'} (1)\n      {summary}\n   Duration  {dur}ms"},
              ok=not f)
        if i < len(edits):
            path, what = edits[i]
            r.add("edit_file", {"path": path, "instruction": what}, f"Edited {path}")
    return r


@case(45, "osa-eslint-iterative", "legit", "https://github.com/Miosa-osa/OSA/pull/163",
      "While fixing eslint errors (run linter, read errors, run again) the stall detector fired 'no forward progress for 12 tool calls', because shell commands were not counted as progress though each returned new output.",
      "no_progress", "the same lint command between edits; fewer problems each run",
      "Each lint run follows edits and reports fewer problems (7, 4, 1, 0), so the repetition is progress.")
def _() -> Run:
    r = Run("osa-163")
    problems = [[("src/api.ts", 12, "no-unused-vars"), ("src/api.ts", 40, "no-explicit-any"), ("src/db.ts", 8, "no-unused-vars"),
                 ("src/db.ts", 61, "prefer-const"), ("src/ui.tsx", 3, "no-unused-vars"), ("src/ui.tsx", 77, "react-hooks/exhaustive-deps"),
                 ("src/util.ts", 5, "eqeqeq")]]
    problems.append(problems[0][3:])
    problems.append(problems[0][6:])
    problems.append([])
    edits = ["src/api.ts", "src/db.ts", "src/ui.tsx", "src/util.ts"]
    for i, p in enumerate(problems):
        out = "\n".join(f"/app/{f}\n  {ln}:{r.rnd.randrange(1, 30)}  error  rule violation  {rule}" for f, ln, rule in p)
        out += f"\n\n✖ {len(p)} problems ({len(p)} errors, 0 warnings)\n" if p else ""
        r.add("shell_execute", {"command": "npx eslint src --ext .ts,.tsx"}, {"exit_code": 1 if p else 0, "stdout": out})
        if i < 3:
            for f in edits[i:i + 1] + ([edits[3]] if i == 2 else []):
                r.add("file_edit", {"path": f, "fix": "apply lint fixes"}, {"ok": True, "path": f})
    return r


@case(46, "codeplain-unit-loop-different-failures", "legit", "https://github.com/Codeplain-ai/codeplain/pull/295",
      "Treating a run of differing failures as a stall produced false positives in the unit-test fix loop: there it is usually the loop working through issues one at a time.",
      "error_streak", "every test run fails, each with a different failure; a patch between runs",
      "Each run fails on a different test after a fix to the previous one, so the failures are being worked through, not repeated.")
def _() -> Run:
    r = Run("codeplain-295")
    failing = ["test_parse_empty_input", "test_parse_unicode_names", "test_totals_rounding", "test_export_header_order"]
    for i, t in enumerate(failing):
        r.add("run_unittests", {"module": "invoice_export"},
              {"passed": 18 + i, "failed": 1, "failures": [{"test": t, "message": f"AssertionError in {t}"}]}, ok=False)
        r.add("patch_file", {"path": "invoice_export.py", "patch": f"--- a/invoice_export.py\n+++ b/invoice_export.py\n@@ fix for {t} @@"},
              {"applied": True})
    r.add("run_unittests", {"module": "invoice_export"}, {"passed": 22, "failed": 0, "failures": []})
    return r


@case(47, "opencrabs-pagination", "legit", "https://github.com/adolfousier/opencrabs/pull/1557",
      "Sequential pagination requests (offset, page, cursor, page_token) were flagged by the loop guard as repetitive or near-match loops because argument normalization collapsed the page increments.",
      "paging", "the same query with a new page number / cursor each call",
      "Every page brings items never seen before in the run, until the last page: paging, not a loop.")
def _() -> Run:
    r = Run("opencrabs-1557")
    token = None
    n = 0
    for page in range(1, 8):
        items = [{"id": f"msg_{r.hexid(10)}", "subject": f"Invoice #{2026000 + n + k}", "from": "billing@vendor.example"} for k in range(5)]
        n += 5
        nxt = f"tok_{r.hexid(12)}" if page < 7 else None
        args = {"query": "invoice", "page_size": 5}
        if token:
            args["page_token"] = token
        r.add("search_emails", args, {"messages": items, "next_page_token": nxt})
        token = nxt
    return r


@case(48, "page-agent-scroll-reads-content", "legit", "https://github.com/alibaba/page-agent/pull/392",
      "The loop detector added to page-agent flags 4 identical actions in a row, and is meant not to flag non-looping repeated scrolls such as scrolling three times to read content.",
      "repeat", "identical scroll arguments; new elements in view after each scroll",
      "Each scroll reveals new listings until the end of the list, so the identical calls read new content.")
def _() -> Run:
    r = Run("page-agent-392")
    r.add("click_element_by_index", {"index": 14}, "Clicked element [14] <a>All listings</a>")
    k = 0
    for i in range(4):
        items = [f"[{30 + k + j}]<a>Apartment {101 + k + j} · {r.rnd.randrange(45, 120)} m² · €{r.rnd.randrange(900, 2400)}</a>" for j in range(4)]
        k += 4
        r.add("scroll_down", {"amount": "page"}, "Scrolled down. Newly visible:\n" + "\n".join(items) + ("\n(end of list)" if i == 3 else ""))
    r.add("done", {"text": "Collected 16 listings"}, "Task completed")
    return r


@case(49, "vercel-ai-mcp-transient-retry", "legit", "https://github.com/vercel/ai/pull/16494",
      "MCP tool calls fail for transient reasons (429, overload, resets); before a client-side retry the error reached the model, which spent a step retrying the exact same call, which then worked.",
      "error_streak", "the same call right after a 429 / 503; then success",
      "Each failure is followed by one retry of the same call that succeeds, so the retries recover and the run moves on.")
def _() -> Run:
    r = Run("vercel-16494")
    args = {"name": "get_weather", "arguments": {"city": "Lisbon", "units": "metric"}}
    r.add("mcp_call_tool", args, {"isError": True, "content": [{"type": "text", "text": "HTTP 429 Too Many Requests (Retry-After: 2)"}]}, ok=False)
    r.add("mcp_call_tool", args, {"content": [{"type": "text", "text": "Lisbon: 21°C, clear, wind 14 km/h NW"}]})
    args2 = {"name": "get_forecast", "arguments": {"city": "Lisbon", "days": 3}}
    r.add("mcp_call_tool", args2, {"isError": True, "content": [{"type": "text", "text": "HTTP 503 Service Unavailable: upstream overloaded"}]}, ok=False)
    r.add("mcp_call_tool", args2, {"content": [{"type": "text", "text": "Thu 22°C sun; Fri 19°C showers; Sat 20°C cloud"}]})
    r.add("mcp_call_tool", {"name": "get_air_quality", "arguments": {"city": "Lisbon"}}, {"content": [{"type": "text", "text": "AQI 31 (good)"}]})
    return r


@case(50, "openmono-checkstatus-poll", "legit", "https://github.com/StartupHakk/OpenMonoAgent.ai/issues/47",
      "Monitoring a long background task, the agent called CheckStatus with identical arguments until done; the doom-loop detector aborted this intentional polling after 3 identical calls.",
      "polling", "identical CheckStatus arguments; status and percentage advance (one unchanged reading), fresh checkedAt",
      "The job moves from queued to completed across the polls (one reading repeats while it works), so it is polling that advances.")
def _() -> Run:
    r = Run("openmono-47")
    tick = clock("2026-05-13T10:00:00", r.rnd, 20, 40)
    r.add("StartJob", {"kind": "reindex", "collection": "docs"}, {"jobId": "job-7781", "status": "queued"})
    for st, pct in [("queued", 0), ("running", 12), ("running", 37), ("running", 64), ("running", 64), ("running", 91), ("completed", 100)]:
        r.add("CheckStatus", {"jobId": "job-7781"}, {"jobId": "job-7781", "status": st, "progress": pct, "checkedAt": iso(tick())})
    return r


def write_set(cases: list[dict[str, Any]], out_dir: Path, case_id: Callable[[dict[str, Any]], str],
              run_prefix: str, tags: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """Each case's run as NDJSON in `out_dir` and the set's `manifest.json`; the manifest.
    `tags` go into every entry after its id (the holdout's `"set"`)."""
    manifest = []
    for c in sorted(cases, key=lambda c: c["number"]):
        run = c["build"]()
        cid = case_id(c)
        fname = f"{cid}.ndjson"
        lines = [json.dumps({"run_id": f"{run_prefix}-{cid}", **call}, ensure_ascii=False) for call in run.calls]
        (out_dir / fname).write_text("\n".join(lines) + "\n", encoding="utf-8")
        entry: dict[str, Any] = {"id": cid, **(tags or {}), "file": fname, "source_url": c["source_url"],
                                 "source_summary": c["source_summary"], "class": c["class"]}
        entry.update(_label(cid, c["class"], run))
        entry.update({"kind_hint": c["kind_hint"], "noise": c["noise"], "why": c["why"], "calls": len(run.calls)})
        manifest.append(entry)
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def _label(cid: str, cls: str, run: Run) -> dict[str, Any]:
    if cls == "loop":
        if run.stop_seq is None:
            raise SystemExit(f"{cid}: a loop case needs a marked stop_by call")
        return {"stop_by": run.stop_seq}
    if run.stop_seq is not None:
        raise SystemExit(f"{cid}: a legitimate case has no stop_by")
    return {"must_stay_quiet": True}


def build_all(out_dir: Path = HERE) -> list[dict[str, Any]]:
    return write_set(CASES, out_dir, lambda c: f"{c['number']:03d}-{c['name']}", "public")


if __name__ == "__main__":
    m = build_all()
    loops = sum(1 for e in m if e["class"] == "loop")
    print(f"{len(m)} cases: {loops} loops, {len(m) - loops} legitimate")
