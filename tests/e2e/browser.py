"""Headless Chromium (Debian's `chromium`) driven over the Chrome DevTools Protocol, for pages
that need their scripts, their layout and a window size: Phoenix's single-page UI.

No driver but the browser itself: `--remote-debugging-port` on loopback and one WebSocket to
the page (`websockets`, already in the test virtualenv through the `frameworks` extra). The
page is asked questions in JavaScript (`evaluate`), which answers from the DOM as laid out at
the window's size; `screenshot` saves what a person would see.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from live import free_port, stop, tail

_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def chromium() -> Optional[str]:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def websockets_installed() -> bool:
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        return False
    return True


class Page:
    def __init__(self, ws: Any):
        self._ws, self._next = ws, 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            reply = json.loads(self._ws.recv(timeout=60))
            if reply.get("id") == ident:
                assert "error" not in reply, (method, reply["error"])
                return reply.get("result", {})

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, script: str) -> Any:
        result = self.call("Runtime.evaluate", expression=script, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def wait_for(self, script: str, what: str, timeout: float = 45.0) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(script)
            if value:
                return value
            assert time.monotonic() < deadline, f"the page never showed {what}"
            time.sleep(0.5)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def browser(tmp_path: Path, width: int = 1400, height: int = 900) -> Iterator[Page]:
    """A headless Chromium with one page of `width` x `height` CSS pixels."""
    from websockets.sync.client import connect

    exe = chromium()
    assert exe, "chromium not found"
    port, log = free_port(), tmp_path / "chromium.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--remote-debugging-address=127.0.0.1", f"--remote-debugging-port={port}", "--hide-scrollbars",
             f"--window-size={width},{height}", f"--user-data-dir={tmp_path / 'chromium-profile'}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        target = _page_target(port, proc, log)
        with connect(target, max_size=64 * 2**20, proxy=None) as ws:
            page = Page(ws)
            page.call("Page.enable")
            page.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
            yield page
    finally:
        stop(proc, group=True)


def _page_target(port: int, proc: subprocess.Popen, log: Path) -> str:
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, f"chromium exited with {proc.returncode}:\n{tail(log)}"
        try:
            with _HTTP.open(f"http://127.0.0.1:{port}/json/list", timeout=2) as reply:
                pages = [t for t in json.load(reply) if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
        except OSError:
            pass
        assert time.monotonic() < deadline, f"chromium's DevTools never answered:\n{tail(log)}"
        time.sleep(0.2)
