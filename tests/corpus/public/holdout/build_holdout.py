"""Write the holdout set of the public-report corpus: NDJSON runs and `manifest.json` here.

A second, smaller set of loops and legitimate look-alikes from public reports, none of them
in the main manifest, labelled and committed BEFORE the product judged them and before any
detector change made while working on the main set's misses (the git history shows the
order). It measures whether those changes generalise: a rule tuned to the main set alone
would pass the main set and fail here. Same format and same label rules as the main set
(../README.md); every entry carries `"set": "holdout"`.

    python tests/corpus/public/holdout/build_holdout.py

Deterministic; imports nothing from otel_loopguard (the helpers come from ../build_cases.py).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _load_builder():
    spec = importlib.util.spec_from_file_location("public_corpus_build_cases", HERE.parent / "build_cases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_b = _load_builder()
Run, clock, iso = _b.Run, _b.clock, _b.iso
CASES: list[dict[str, Any]] = []
case = _b.registrar(CASES)


# ---------------------------------------------------------------------------------------------
# Loops
# ---------------------------------------------------------------------------------------------

@case(1, "gemini-readfile-same-component", "loop", "https://github.com/google-gemini/gemini-cli/issues/8259",
      "Asked to change an Angular component, the agent called ReadFile on the same .component.html again and again, even after the user wrote 'do not ReadFile it again', until the CLI's own loop detection halted the request.",
      "repeat", "none in the result; the read tool reports a fresh read time",
      "The same file read five times with the same content brings nothing after the first read: the default repeat stop.")
def _() -> Any:
    r = Run("gemini-8259", id_style="gemini")
    tick = clock("2025-09-11T08:12:00", r.rnd, 4, 15)
    html = ("<div class=\"office-details\">\n  <h2>{{ office.name }}</h2>\n  <app-address [address]=\"office.address\"></app-address>\n"
            "  <button (click)=\"save()\" [disabled]=\"form.invalid\">Save</button>\n</div>\n")
    r.add("list_directory", {"path": "src/app/offices"}, "office-details.component.html\noffice-details.component.ts\noffices.module.ts\n")
    for i in range(7):
        r.add("read_file", {"absolute_path": "C:\\repo\\WebUI\\src\\app\\offices\\office-details.component.html"},
              {"content": html, "readAt": iso(tick())})
        if i == 4:
            r.mark()
    return r


@case(2, "stella-reread-session-tally", "loop", "https://github.com/macanderson/stella/pull/440",
      "read_file appends '(N/M lines shown · read K× this session)' to every output as an anti-loop nudge; the tally changed on every read, so re-reads of an unchanged file never looked identical and a bare re-read spiral ran to the 200-step cap.",
      "repeat", "the read counter in the footer (read 1×, 2×, 3×...)",
      "The file is unchanged and the only difference is a counter of the reads themselves, so the fifth read is the repeat stop.")
def _() -> Any:
    r = Run("stella-440", id_style="anthropic")
    body = "\n".join(f"{n:>4}\t{line}" for n, line in enumerate([
        "pub fn drift_recover(state: &mut State) -> Result<()> {", "    let snap = state.snapshot()?;",
        "    if snap.is_stale() {", "        return Err(Error::Stale);", "    }", "    state.apply(snap)", "}"], start=1))
    for k in range(1, 8):
        r.add("read_file", {"path": "stella-core/src/drift.rs"}, f"{body}\n\n(7/7 lines shown · read {k}× this session)")
        if k == 5:
            r.mark()
    return r


@case(3, "jiuwen-grep-zero-results", "loop", "https://github.com/openJiuwen-ai/agent-core/issues/766",
      "When a tool returned zero results or an error, the ReAct agent kept invoking the same tool with the same arguments (e.g. grep with the same pattern after a zero-result return) although the failed result was in its context.",
      "repeat", "search time and files-scanned count in the grep summary",
      "The same grep with the same empty answer five times learns nothing after the first: the repeat stop at the fifth call.")
def _() -> Any:
    r = Run("agent-core-766")
    r.add("read_file", {"path": "service/config.py"}, "TIMEOUT = 30\nRETRIES = 3\n")
    for i in range(7):
        ms = r.rnd.randrange(18, 95)
        r.add("grep", {"pattern": "def load_tenant_config", "path": "service/"},
              f"No matches found.\n(scanned 214 files in {ms}ms)")
        if i == 4:
            r.mark()
    return r


@case(4, "opencode-edit-guess-oldstring", "loop", "https://github.com/anomalyco/opencode/issues/30798",
      "When edit could not find oldString, its error only said the text must match exactly; the AI adjusted its guess and retried the edit again and again without ever reading the file.",
      "error_streak", "a different guessed oldString on every try; the same 'Could not find oldString' error",
      "Four failed edits of the same file with the same error, and no read in between, are the default error-streak stop.")
def _() -> Any:
    r = Run("opencode-30798", id_style="anthropic")
    guesses = ["  const total = items.reduce((a, b) => a + b.price, 0)", "  const total = items.reduce((acc, it) => acc + it.price, 0);",
               "const total = items.reduce((sum, i) => sum + i.price, 0);", "  let total = items.reduce((a, b) => a + b.price, 0);",
               "\tconst total = items.reduce((a,b)=>a+b.price,0);", "  const total = items.reduce((a, b) => a + b.price, 0) ;",
               "  const total=items.reduce((a, b) => a + b.price, 0);"]
    r.add("glob", {"pattern": "src/cart/*.ts"}, "src/cart/total.ts\nsrc/cart/cart.ts\n")
    for i, g in enumerate(guesses):
        r.add("edit", {"filePath": "src/cart/total.ts", "oldString": g, "newString": g.replace("b.price", "b.price * b.qty")},
              "Error: Could not find oldString. It must match exactly, including whitespace, indentation, and line endings.",
              ok=False)
        if i == 3:
            r.mark()
    return r


@case(5, "gemini-edit-zero-occurrences-reread", "loop", "https://github.com/google-gemini/gemini-cli/issues/5761",
      "While editing files every session ended in a loop: replace failed with '0 occurrences found for old_string ... Use read_file tool', the agent read the file and tried again, until the CLI halted it as a potential loop.",
      "error_streak", "the old_string guess changes each try; the read between tries returns the unchanged file",
      "The reads between the failed replaces return the same unchanged file, so they bring nothing: the fourth failed replace of the same file is the error-streak stop.")
def _() -> Any:
    r = Run("gemini-5761", id_style="gemini")
    src = "def parse(line):\n    parts = line.split(',')\n    return {'id': parts[0], 'name': parts[1]}\n"
    olds = ["parts = line.split(\",\")", "    parts = line.split(', ')", "parts=line.split(',')\n    return", "  parts = line.split(',')",
            "    parts = line.split(',' )"]
    r.add("read_file", {"absolute_path": "/home/m/proj/ingest/parse.py"}, src)
    for i, o in enumerate(olds):
        r.add("replace", {"file_path": "/home/m/proj/ingest/parse.py", "old_string": o, "new_string": o.replace("split", "strip().split")},
              {"error": f"Failed to edit, 0 occurrences found for old_string ({o[:20]}...). The exact text in old_string was not found. "
                        "Ensure you're not escaping content incorrectly and check whitespace, indentation, and context. Use read_file tool to verify."},
              ok=False)
        if i == 3:
            r.mark()
        if i < len(olds) - 1:
            r.add("read_file", {"absolute_path": "/home/m/proj/ingest/parse.py"}, src)
    return r


@case(6, "crewai-delegate-same-input", "loop", "https://github.com/crewAIInc/crewAI/issues/6",
      "A crew's manager agent called 'Delegate Work to Co-Worker' with the same co-worker, task and context again and again, threatening the OpenAI budget.",
      "repeat", "the co-worker's answer differs in its timing line only",
      "The same delegation with the same answer five times is the repeat stop; the co-worker has nothing new to say.")
def _() -> Any:
    r = Run("crewai-6")
    task = "Researcher|Compile list of IDEs|Please compile a comprehensive list of IDEs that support AI/LLM assisted programming."
    answer = ("Final Answer: AI-assisted IDEs: VS Code (Copilot, Continue), JetBrains IDEs (AI Assistant), Cursor, Zed, "
              "Neovim (plugins). Lesser known: Tabnine plugins, Codeium extensions.")
    for i in range(7):
        r.add("Delegate work to co-worker", {"input": task}, f"{answer}\n[Researcher finished in {r.rnd.uniform(8, 21):.1f}s]")
        if i == 4:
            r.mark()
    return r


@case(7, "openhands-build-install-cycle", "loop", "https://github.com/OpenHands/OpenHands/issues/7960",
      "The agent went round 'let me try to build the application; first install package X; build; install X...' indefinitely because one or the other did not work, burning tokens until noticed.",
      "cycle", "build timings and the pip download progress differ; the build error is the same",
      "The (install, build) block with the same answers repeated a third time is the default cycle stop.")
def _() -> Any:
    r = Run("openhands-7960")
    for rep in range(4):
        r.add("execute_bash", {"command": "pip install python-magic"},
              "Requirement already satisfied: python-magic in /usr/local/lib/python3.12/site-packages (0.4.27)\n"
              f"[Command finished with exit code 0]")
        secs = r.rnd.uniform(2.0, 6.0)
        r.add("execute_bash", {"command": "python -m build"},
              "* Creating isolated environment: venv+pip...\n* Building sdist...\n"
              "ERROR Backend subprocess exited when trying to invoke get_requires_for_build_sdist\n"
              "ImportError: failed to find libmagic.  Check your installation\n"
              f"(elapsed {secs:.2f}s)\n[Command finished with exit code 1]", ok=False)
        if rep == 2:
            r.mark()
    return r


@case(8, "cline-write-replace-pingpong", "loop", "https://github.com/cline/cline/issues/3039",
      "As the project grew, Cline got into an endless loop between write_to_file and replace_in_file on the same file, consuming many tokens without an actual fix.",
      "cycle", "none in the actions; the same two answers each round",
      "Writing the same content, then failing the same replace on it, three times round is the default cycle stop.")
def _() -> Any:
    r = Run("cline-3039", id_style="anthropic")
    content = "export function formatPrice(cents: number): string {\n  return `$${(cents / 100).toFixed(2)}`;\n}\n"
    diff = "<<<<<<< SEARCH\nexport function formatPrice(cents: number) {\n=======\nexport function formatPrice(cents: number, currency = 'USD') {\n>>>>>>> REPLACE"
    for rep in range(4):
        r.add("write_to_file", {"path": "src/utils/price.ts", "content": content}, "The content was successfully saved to src/utils/price.ts.")
        r.add("replace_in_file", {"path": "src/utils/price.ts", "diff": diff},
              "The tool execution failed with the following error: The SEARCH block does not match anything in the file.", ok=False)
        if rep == 2:
            r.mark()
    return r


@case(9, "opencode-git-commit-nothing", "loop", "https://github.com/anomalyco/opencode/issues/43800",
      "In a long multi-phase task the agent intermittently re-emitted the same tool call instead of moving on: repeated reads of one file, repeated git commit / git add attempts, repeated git status, with no new output.",
      "repeat", "none (the same command, the same 'nothing to commit' answer, exit code 1)",
      "The same commit attempt with the same refusal five times in a row is the repeat stop (the error streak may stop it sooner).")
def _() -> Any:
    r = Run("opencode-43800", id_style="anthropic")
    r.add("bash", {"command": "git add -A && git status --short"}, {"output": "M  src/phase2/migrate.ts\n", "exit": 0})
    r.add("bash", {"command": "git commit -m \"phase 2: migrate user table\""},
          {"output": "[main 4be01c2] phase 2: migrate user table\n 1 file changed, 42 insertions(+)\n", "exit": 0})
    for i in range(7):
        r.add("bash", {"command": "git commit -m \"phase 2: migrate user table\""},
              {"output": "On branch main\nnothing to commit, working tree clean\n", "exit": 1})
        if i == 4:
            r.mark()
    return r


@case(10, "everruns-alternating-read-ranges", "loop", "https://github.com/everruns/everruns/pull/2295",
      "A session repeatedly alternated between the same ranges of a saved tool-output file (offset 0, then the adjacent range, then offset 0 again), so a detector of consecutive identical calls never fired.",
      "cycle", "two alternating offsets; the same two windows each time",
      "Re-reading the same two windows a third time round is the default cycle stop; nothing new is in them.")
def _() -> Any:
    r = Run("everruns-2295")
    lines = [f"[{n:04d}] test_{n % 37:02d} {'PASS' if n % 11 else 'FAIL'}" for n in range(400)]
    path = "/tmp/outputs/tool_7f3a/stdout.txt"
    r.add("bash", {"command": "cargo test --workspace 2>&1 | tee /tmp/outputs/tool_7f3a/stdout.txt | tail -1"},
          "test result: FAILED. 363 passed; 37 failed")
    for rep in range(4):
        r.add("read_file", {"path": path, "offset": 0, "limit": 200}, "\n".join(lines[:200]))
        r.add("read_file", {"path": path, "offset": 200, "limit": 200}, "\n".join(lines[200:400]))
        if rep == 2:
            r.mark()
    return r


@case(11, "qwen-readlines-same-lines", "loop", "https://github.com/QwenLM/qwen-code/issues/3716",
      "ReadLines kept returning the same lines in an infinite loop where the user expected different line numbers throughout the file, iteratively.",
      "no_progress", "the requested start line advances; the answer is the same first lines every time",
      "After the first read every answer repeats lines already returned, so the sixth read in a row that brings nothing new is the no-progress stop.")
def _() -> Any:
    r = Run("qwen-3716")
    first = "\n".join(f"{n}: {t}" for n, t in enumerate([
        "import os", "import sys", "from pathlib import Path", "", "ROOT = Path(__file__).parent", "",
        "def main(argv):", "    cfg = load(argv[1])", "    run(cfg)", "    return 0"], start=1))
    for i in range(9):
        r.add("ReadLines", {"path": "tools/runner.py", "start": 1 + 10 * i, "end": 10 + 10 * i}, first)
        if i == 6:
            r.mark()
    return r


# ---------------------------------------------------------------------------------------------
# Legitimate look-alikes
# ---------------------------------------------------------------------------------------------

@case(12, "vtcode-read-file-ranges", "legit", "https://github.com/vinhnx/VTCode/issues/680",
      "The repeated-read loop guard fired on reads of the same file that asked for different ranges; the maintainer fixed it by including the effective read shape in the key.",
      "repeat", "same path on every call; a new range each time",
      "Each read returns a part of the file not read before, so it brings new content: reading, not looping.")
def _() -> Any:
    r = Run("vtcode-680")
    for k in range(6):
        start = 1 + 120 * k
        body = "\n".join(f"{n:>5}  let v{n} = compute_{n % 9}(input, {r.rnd.randrange(1000)});" for n in range(start, start + 6))
        r.add("read_file", {"path": "vtcode-core/src/tools/registry.rs", "start_line": start, "end_line": start + 119}, body)
    return r


@case(13, "fastclaw-deploy-status-poll", "legit", "https://github.com/fastclaw-ai/fastclaw/pull/80",
      "Repeated-tool detection matched arguments before execution and flagged normal polling; the fix counts a loop only when tool, arguments and result are all identical, so polling with progressing results passes.",
      "polling", "identical arguments; the deployment advances (one unchanged reading); fresh timestamps",
      "The deployment moves from queued to live across the polls, so it is polling that advances.")
def _() -> Any:
    r = Run("fastclaw-80")
    tick = clock("2026-06-29T14:00:00", r.rnd, 10, 20)
    r.add("deploy", {"service": "billing-api", "version": "2.14.0"}, {"deployment": "dep-5521", "state": "queued"})
    for st, done in [("queued", 0), ("building", 1), ("building", 3), ("building", 3), ("rolling_out", 4), ("rolling_out", 6), ("live", 8)]:
        r.add("get_deployment", {"deployment": "dep-5521"},
              {"deployment": "dep-5521", "state": st, "replicas_ready": f"{done}/8", "updated_at": iso(tick())})
    return r


@case(14, "qwen-verification-cycle", "legit", "https://github.com/QwenLM/qwen-code/issues/9733",
      "Loop detection was reported to kill unattended turns on verification cycles (read_file, edit, write_file, run_shell_command...) where every call had distinct arguments.",
      "cycle", "the same four-step pattern over different files and commands",
      "Each round reads, edits and checks a different file, so the pattern repeats but every call brings something new.")
def _() -> Any:
    r = Run("qwen-9733")
    mods = ["auth", "billing", "search"]
    for m in mods:
        r.add("read_file", {"absolute_path": f"/w/app/src/{m}/index.ts"}, f"export * from './{m}.service';\nexport * from './{m}.types';\n")
        r.add("edit", {"file_path": f"/w/app/src/{m}/{m}.service.ts", "old_string": "any", "new_string": f"{m.capitalize()}Input"},
              f"Successfully modified file: /w/app/src/{m}/{m}.service.ts (1 replacements).")
        r.add("write_file", {"file_path": f"/w/app/src/{m}/{m}.types.ts", "content": f"export interface {m.capitalize()}Input {{ id: string }}\n"},
              f"Successfully created and wrote to new file: /w/app/src/{m}/{m}.types.ts.")
        r.add("run_shell_command", {"command": f"npx tsc --noEmit -p src/{m}"},
              f"Command: npx tsc --noEmit -p src/{m}\nDirectory: (root)\nOutput: (empty)\nExit Code: 0")
    return r


@case(15, "traceroost-typecheck-after-edits", "legit", "https://github.com/traceroost/core/pull/215",
      "A repeated-tool streak now resets when a file is edited in between, so re-running a verification command (tests, lint) after each fix no longer looks like a stuck agent re-issuing the same call.",
      "repeat", "the same typecheck command after each edit; fewer errors each run",
      "Each run follows an edit and reports fewer errors (4, 3, 1, 0), so the re-runs are progress.")
def _() -> Any:
    r = Run("traceroost-215")
    errs = [[("src/ingest.ts", 14), ("src/ingest.ts", 58), ("src/store.ts", 9), ("src/api.ts", 120)],
            [("src/ingest.ts", 58), ("src/store.ts", 9), ("src/api.ts", 120)], [("src/api.ts", 120)], []]
    fixes = ["src/ingest.ts", "src/store.ts", "src/api.ts"]
    for i, e in enumerate(errs):
        out = "\n".join(f"{f}({ln},{r.rnd.randrange(3, 40)}): error TS2345: Argument of type 'string' is not assignable." for f, ln in e)
        out += f"\n\nFound {len(e)} errors in {len({f for f, _ in e})} files." if e else ""
        r.add("bash", {"command": "npx tsc --noEmit"}, {"stdout": out, "exit_code": 2 if e else 0}, ok=not e)
        if i < len(fixes):
            r.add("edit_file", {"path": fixes[i], "change": "narrow the argument type"}, {"ok": True})
    return r


@case(16, "openhands-empty-command-wait", "legit", "https://github.com/OpenHands/OpenHands/pull/10750",
      "Agents legitimately send several empty commands in a row to wait for output from a long-running process; the stuck detector marked them stuck after four identical empty commands.",
      "repeat", "identical empty command; new build output each time until it finishes",
      "Each empty command returns new lines of a running build, ending with its completion, so the waits read new output.")
def _() -> Any:
    r = Run("openhands-10750")
    r.add("execute_bash", {"command": "npm run build", "timeout": 30},
          "> web@1.4.0 build\n> next build\n\n   Creating an optimized production build ...\n"
          "[The command has no new output after 30 seconds. You may wait longer to see additional output by sending empty command '']")
    steps = ["   Compiled successfully", "   Linting and checking validity of types ...", "   Collecting page data ...",
             "   Generating static pages (0/42) ...", "   Generating static pages (21/42)", "   Generating static pages (42/42)",
             "   Finalizing page optimization ..."]
    for s in steps:
        r.add("execute_bash", {"command": "", "is_input": False},
              f"{s}\n[The command has no new output after 30 seconds. You may wait longer to see additional output by sending empty command '']")
    r.add("execute_bash", {"command": "", "is_input": False}, "Route (app)  Size  First Load JS\n○ /  5.2 kB  94 kB\n[The command completed with exit code 0.]")
    return r


def build_all(out_dir: Path = HERE) -> list[dict[str, Any]]:
    return _b.write_set(CASES, out_dir, lambda c: f"h{c['number']:02d}-{c['name']}", "holdout", {"set": "holdout"})


if __name__ == "__main__":
    m = build_all()
    loops = sum(1 for e in m if e["class"] == "loop")
    print(f"{len(m)} holdout cases: {loops} loops, {len(m) - loops} legitimate")
