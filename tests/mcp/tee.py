"""Runs a command and records the bytes that go into it and come out of it (not the proxy's code).

    python tee.py LOG -- command ...    writes LOG.in (bytes to the command's stdin) and LOG.out
                                        (bytes from its stdout), each flushed as it passes
"""

import os
import subprocess
import sys
import threading


def copy(src, dst, log_path: str, close_dst: bool) -> None:
    with open(log_path, "wb", buffering=0) as log:
        while True:
            data = src.read1(65536) if hasattr(src, "read1") else src.read(65536)
            if not data:
                break
            log.write(data)
            try:
                dst.write(data)
                dst.flush()
            except (BrokenPipeError, ValueError):
                break
    if close_dst:
        try:
            dst.close()
        except OSError:
            pass


def main() -> int:
    log, command = sys.argv[1], sys.argv[3:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    inbound = threading.Thread(target=copy, args=(sys.stdin.buffer, child.stdin, log + ".in", True), daemon=True)
    inbound.start()
    copy(child.stdout, sys.stdout.buffer, log + ".out", False)
    return child.wait()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code if code >= 0 else 128 - code)  # not sys.exit: the stdin thread may still be blocked reading, which aborts finalization
