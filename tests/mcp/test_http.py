"""Streamable HTTP: the proxy before a real SDK server, the SDK's real client, many sessions."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest

from harness import HERE, ROOT, Sink, env, text
from test_proxy import wait_for

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _start(command: list[str], port: int, log: Path, environment: dict[str, str]) -> subprocess.Popen:
    with log.open("w") as err:
        proc = subprocess.Popen(command, cwd=ROOT, env=environment, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
    wait_for(lambda: proc.poll() is not None or _listening(port), f"{command[2:4]} listening", timeout=60)
    assert proc.poll() is None, log.read_text()
    return proc


class Endpoint(str):
    """The proxy's endpoint; `upstream`: the server's own."""

    upstream = ""


@pytest.fixture
def stack(tmp_path: Path, sink: Sink, request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    """server <- proxy (in the mode the test gives); yields the proxy's endpoint."""
    mode = request.param
    server_port, proxy_port = _port(), _port()
    server = _start([sys.executable, str(HERE / "http_server.py"), str(server_port)], server_port,
                    tmp_path / "server.err", env(sink))
    proxy = _start([sys.executable, "-m", "otel_loopguard.cli", "mcp-proxy", "--mode", mode, "--listen",
                    f"127.0.0.1:{proxy_port}", "--upstream", f"http://127.0.0.1:{server_port}/mcp"], proxy_port,
                   tmp_path / "proxy.err", env(sink))
    try:
        endpoint = Endpoint(f"http://127.0.0.1:{proxy_port}/mcp")
        endpoint.upstream = f"http://127.0.0.1:{server_port}/mcp"
        yield endpoint
    finally:
        for proc in (proxy, server):
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


async def _calls(url: str, calls: list[tuple[str, dict]]) -> list[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return [await session.call_tool(name, args) for name, args in calls]


async def _session(url: str, calls: list[tuple[str, dict]]) -> tuple[list[Any], int]:
    """The session's results, then how many counted calls reached the server (asked in a
    session of its own: a stopped session's later calls are all refused)."""
    results = await _calls(url, calls)
    return results, int(text((await _calls(url, [("executed", {})]))[0]))


REPEAT = [("counted_lookup", {"order_id": "A-1"})] * 5


@pytest.mark.parametrize("stack", ["observe"], indirect=True)
def test_observe_traces_each_call_in_its_session(stack: str, sink: Sink) -> None:
    results, executed = anyio.run(_session, stack, [("search_docs", {"query": "refund"}), *REPEAT])
    assert [r.is_error for r in results] == [False] * 6 and executed == 5
    spans = wait_for(lambda: len(sink.tool_spans()) >= 7 and sink.tool_spans(), "7 tool spans")
    session = [s for s in spans if s.attributes["gen_ai.tool.name"] != "executed"]
    assert len(session) == 6 and len({s.attributes["mcp.session.id"] for s in session}) == 1
    assert all(s.attributes["network.transport"] == "tcp" for s in spans)
    verbs = [e[1]["loopguard.decision"] for s in spans for e in s.events if e[0] == "loopguard.decision"]
    assert "would_block" in verbs


@pytest.mark.parametrize("stack", ["enforce"], indirect=True)
def test_enforce_answers_the_fifth_and_the_server_never_runs_it(stack: str, sink: Sink) -> None:
    results, executed = anyio.run(_session, stack, REPEAT)
    assert [r.is_error for r in results] == [False] * 4 + [True] and "loop guard" in text(results[4])
    assert executed == 4


@pytest.mark.parametrize("stack", ["enforce"], indirect=True)
def test_many_concurrent_sessions_are_judged_apart(stack: str, sink: Sink) -> None:
    outcomes: list[Any] = []

    async def one() -> None:
        outcomes.append((await _calls(stack, REPEAT), 0))

    async def many() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(one)
    anyio.run(many)
    assert [[r.is_error for r in results] for results, _ in outcomes] == [[False] * 4 + [True]] * 8
    assert int(text(anyio.run(_calls, stack, [("executed", {})])[0])) == 32  # 4 a session reached the server
    spans = wait_for(lambda: len(sink.tool_spans()) >= 41 and sink.tool_spans(), "41 tool spans")
    lookups = [s for s in spans if s.attributes["gen_ai.tool.name"] == "counted_lookup"]
    assert len(lookups) == 40 and len({s.attributes["mcp.session.id"] for s in lookups}) == 8
    assert sum(s.attributes.get("loopguard.dispatched") is False for s in lookups) == 8


def test_a_server_that_does_not_answer_gets_the_client_a_502_and_the_proxy_goes_on(tmp_path: Path, sink: Sink) -> None:
    import httpx2

    closed, proxy_port = _port(), _port()  # nothing listens on `closed`
    proxy = _start([sys.executable, "-m", "otel_loopguard.cli", "mcp-proxy", "--listen", f"127.0.0.1:{proxy_port}",
                    "--upstream", f"http://127.0.0.1:{closed}/mcp"], proxy_port, tmp_path / "proxy.err", env(sink))
    try:
        for _ in range(2):
            answer = httpx2.post(f"http://127.0.0.1:{proxy_port}/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                                 headers={"content-type": "application/json"}, timeout=30)
            assert answer.status_code == 502 and "did not answer" in answer.text
        assert proxy.poll() is None
    finally:
        proxy.terminate()
        proxy.wait(timeout=20)


@pytest.mark.parametrize("stack", ["observe"], indirect=True)
def test_a_malformed_request_gets_the_servers_own_answer(stack: str, sink: Sink) -> None:
    """The same bad body sent direct and through the proxy: the same status and body back."""
    import httpx2

    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    for body in (b"{oops", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}'):
        direct = httpx2.post(stack.upstream, content=body, headers=headers, timeout=30)
        through = httpx2.post(stack, content=body, headers=headers, timeout=30)
        assert 400 <= direct.status_code < 500
        assert (through.status_code, through.content) == (direct.status_code, direct.content)
