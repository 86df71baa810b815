"""The proxy never breaks the session: peers that crash, leave, cancel, flood or misbehave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness import RawClient, Sink, call, client, env, lines, proxy_command
from test_proxy import wait_for

pytest.importorskip("mcp")


def test_a_malformed_line_from_the_client_reaches_the_server_and_the_session_goes_on(tmp_path: Path, sink: Sink) -> None:
    raw = RawClient(tmp_path, env(sink))
    raw.initialize()
    raw.send(b"{oops\n")
    assert raw.read_json()["error"]["code"] == -32700  # the server's own answer, passed back
    raw.send(call(1, "echo", {"x": 1}))
    assert raw.read_json()["result"]["content"][0]["text"] == '{"x": 1}'
    raw.close_input()
    assert raw.wait() == 0
    assert b"{oops\n" in lines(tmp_path / "server.in")
    assert "not JSON" in raw.stderr()


def test_a_malformed_line_from_the_server_reaches_the_client_and_the_call_still_ends(tmp_path: Path, sink: Sink) -> None:
    raw = RawClient(tmp_path, env(sink))
    raw.initialize()
    raw.send(call(1, "garbage", {"x": 1}))
    assert raw.read() == b"{this is not json\n"
    assert raw.read_json()["id"] == 1
    raw.send(call(2, "echo", {"x": 2}))
    assert raw.read_json()["id"] == 2
    raw.close_input()
    assert raw.wait() == 0
    spans = wait_for(lambda: len(sink.tool_spans()) == 2 and sink.tool_spans(), "2 tool spans")
    assert all("error.type" not in s.attributes for s in spans)


def test_a_batch_passes_whole_and_each_call_is_traced(tmp_path: Path, sink: Sink) -> None:
    raw = RawClient(tmp_path, env(sink))
    raw.initialize()
    batch = json.dumps([call(1, "echo", {"a": 1}), call(2, "echo", {"b": 2})]).encode() + b"\n"
    raw.send(batch)
    answers = raw.read_json()
    assert [a["id"] for a in answers] == [1, 2]
    raw.close_input()
    assert raw.wait() == 0
    spans = wait_for(lambda: len(sink.tool_spans()) == 2 and sink.tool_spans(), "2 tool spans")
    assert sorted(s.attributes["jsonrpc.request.id"] for s in spans) == ["1", "2"]
    assert lines(tmp_path / "server.in")[2] == batch


def test_a_server_that_exits_mid_call_gets_the_client_an_error_and_the_proxy_its_status(tmp_path: Path,
                                                                                        sink: Sink) -> None:
    raw = RawClient(tmp_path, env(sink))
    raw.initialize()
    raw.send(call(7, "exit"))
    answer = raw.read_json()
    assert answer["id"] == 7 and "server is gone" in answer["error"]["message"]
    assert raw.read() == b""  # the proxy closed the client's stdout
    assert raw.wait() == 3  # the server's exit status
    span = wait_for(lambda: sink.tool_spans(), "the call's span")[0]
    assert span.attributes["error.type"] == "server_exit"


def test_a_server_that_crashes_mid_call_never_hangs_the_sdk_client(tmp_path: Path, sink: Sink) -> None:
    async def go() -> Any:
        with anyio.fail_after(60):
            async with client(tmp_path, proxy_command(tmp_path, mode="observe"), env(sink)) as session:
                ok = await session.call_tool("lookup_order", {"order_id": "A-1"})
                with pytest.raises(Exception) as failed:
                    await session.call_tool("crash", {"code": 9})
                return ok, failed.value
    ok, error = anyio.run(go)
    assert ok.is_error is False and "server is gone" in str(error)


def test_a_client_that_leaves_mid_call_ends_the_server_and_the_span(tmp_path: Path, sink: Sink) -> None:
    raw = RawClient(tmp_path, env(sink))
    raw.initialize()
    raw.send(call(5, "hang"))
    raw.close_input()
    assert raw.wait() == 0  # the server saw its stdin close and exited
    span = wait_for(lambda: sink.tool_spans(), "the call's span")[0]
    assert span.attributes["error.type"] == "client_disconnected"


def test_a_server_that_ignores_the_end_of_its_input_is_terminated(tmp_path: Path, sink: Sink) -> None:
    stubborn = ["python3", "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
    raw = RawClient(tmp_path, env(sink), server=stubborn)
    raw.close_input()
    assert raw.wait(timeout=60) != 0  # grace, SIGTERM (ignored by the server, tee.py ends), then kill


def test_a_cancelled_call_ends_its_span_and_the_session_goes_on(tmp_path: Path, sink: Sink) -> None:
    raw = RawClient(tmp_path, env(sink))
    raw.initialize()
    raw.send(call(3, "hang"))
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "user"}})
    raw.send(call(4, "echo", {"x": 4}))
    assert raw.read_json()["id"] == 4
    raw.close_input()
    assert raw.wait() == 0
    spans = wait_for(lambda: len(sink.tool_spans()) == 2 and sink.tool_spans(), "2 tool spans")
    by_id = {s.attributes["jsonrpc.request.id"]: s for s in spans}
    assert by_id["3"].attributes["error.type"] == "cancelled" and "error.type" not in by_id["4"].attributes
    assert any(b"notifications/cancelled" in line for line in lines(tmp_path / "server.in"))


def test_progress_and_log_notifications_pass_both_ways_unchanged(tmp_path: Path, sink: Sink) -> None:
    progress: list[float] = []
    logged: list[Any] = []

    async def on_progress(value: float, total: Any, message: Any) -> None:
        progress.append(value)

    async def on_log(params: Any) -> None:
        logged.append(params.data)

    async def go() -> Any:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        async with client(tmp_path, proxy_command(tmp_path, mode="observe"), env(sink)) as session:
            return await session.call_tool("slow", {"seconds": 0.2}, progress_callback=on_progress)
    result = anyio.run(go)
    assert result.is_error is False and progress == [0, 1, 2, 3]
    assert lines(tmp_path / "client.in") == lines(tmp_path / "server.in")
    assert lines(tmp_path / "server.out") == lines(tmp_path / "client.out")
    assert sum(b"notifications/progress" in line for line in lines(tmp_path / "client.out")) == 4
    assert sum(b"notifications/message" in line for line in lines(tmp_path / "client.out")) == 4


def test_a_large_result_passes_byte_for_byte(tmp_path: Path, sink: Sink) -> None:
    async def go() -> Any:
        async with client(tmp_path, proxy_command(tmp_path, mode="observe"), env(sink)) as session:
            return await session.call_tool("big", {"kib": 8192})  # 8 MiB of text
    result = anyio.run(go)
    assert len(result.content[0].text) == 8192 * 1024
    out = lines(tmp_path / "client.out")
    assert max(len(line) for line in out) > 8 * 1024 * 1024 and out == lines(tmp_path / "server.out")


def test_a_server_that_cannot_start_is_named_and_the_proxy_exits(tmp_path: Path, sink: Sink) -> None:
    import subprocess
    import sys

    from harness import ROOT

    missing = str(tmp_path / "no-such-server")
    done = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "mcp-proxy", "--", missing], cwd=ROOT,
                          env=env(sink), input=b"", capture_output=True, timeout=60)
    assert done.returncode == 127 and done.stdout == b""  # nothing on the client's channel
    assert "cannot start the MCP server" in done.stderr.decode() and "no-such-server" in done.stderr.decode()
