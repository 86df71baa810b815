"""`otel-loopguard mcp-proxy` between the MCP SDK's real client and a real server (stdio)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import anyio
import pytest

from harness import Sink, client, env, lines, proxy_command, text

pytest.importorskip("mcp")  # the `mcp` extra (scripts/test.sh installs it)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def calls(tmp: Path, mode: str, sink: Sink, script: list[tuple[str, dict]], **extra: str) -> list[Any]:
    async def go() -> list[Any]:
        async with client(tmp, proxy_command(tmp, mode=mode), env(sink, **extra)) as session:
            await session.list_tools()
            return [await session.call_tool(name, args) for name, args in script]
    return anyio.run(go)


def tools_calls(path: Path) -> list[dict]:
    out = []
    for line in lines(path):
        message = json.loads(line)
        if isinstance(message, dict) and message.get("method") == "tools/call":
            out.append(message)
    return out


HEALTHY = [("lookup_order", {"order_id": "A-1"}), ("search_docs", {"query": "refund"}),
           ("lookup_order", {"order_id": "B-2"}), ("search_docs", {"query": "shipping"})]
REPEAT = [("lookup_order", {"order_id": "A-1"})] * 5


def test_observe_passes_every_message_unchanged_both_ways(tmp_path: Path, sink: Sink) -> None:
    results = calls(tmp_path, "observe", sink, HEALTHY + REPEAT)
    assert [r.is_error for r in results] == [False] * 9
    sent, received = lines(tmp_path / "client.in"), lines(tmp_path / "server.in")
    answered, answers = lines(tmp_path / "server.out"), lines(tmp_path / "client.out")
    assert len(sent) >= 12 and sent == received  # initialize, initialized, tools/list, 9 calls
    assert len(answered) >= 11 and answered == answers
    spans = wait_for(lambda: len(sink.tool_spans()) == 9 and sink.tool_spans(), "9 tool spans")
    assert {s.attributes["mcp.session.id"] for s in spans} == {spans[0].attributes["loopguard.run.id"]}
    assert [s.attributes["gen_ai.tool.name"] for s in spans][:4] == [n for n, _ in HEALTHY]
    assert json.loads(spans[0].attributes["gen_ai.tool.call.arguments"]) == {"order_id": "A-1"}
    assert "pending" in spans[0].attributes["gen_ai.tool.call.result"]
    assert all(s.attributes["loopguard.mode"] == "observe" and len(s.attributes["loopguard.args.digest"]) == 32
               for s in spans)
    verbs = [e[1]["loopguard.decision"] for s in spans for e in s.events if e[0] == "loopguard.decision"]
    assert "would_block" in verbs and "deny" not in verbs
    # The processor's own judgement of the session (the run is the session): a repeat.
    kinds = {e[1].get("loopguard.finding.kind") for s in spans for e in s.events if e[0] == "loopguard.decision"}
    assert "repeat" in kinds


def test_enforce_answers_the_fifth_identical_call_and_the_server_never_sees_it(tmp_path: Path, sink: Sink) -> None:
    results = calls(tmp_path, "enforce", sink, REPEAT)
    assert [r.is_error for r in results] == [False, False, False, False, True]
    assert "loop guard" in text(results[4]) and "lookup_order" in text(results[4]) and '"A-1"' in text(results[4])
    assert len(tools_calls(tmp_path / "client.in")) == 5
    assert len(tools_calls(tmp_path / "server.in")) == 4  # the fifth never reached the server
    spans = wait_for(lambda: len(sink.tool_spans()) == 5 and sink.tool_spans(), "5 tool spans")
    denied = [s for s in spans if s.attributes.get("loopguard.dispatched") is False]
    assert len(denied) == 1 and denied[0].attributes["jsonrpc.request.id"] == tools_calls(tmp_path / "client.in")[4]["id"].__str__()


def test_enforce_lets_a_healthy_session_through(tmp_path: Path, sink: Sink) -> None:
    """Negative control: different calls, even a second round of them (which only warns), are never answered
    by the proxy."""
    results = calls(tmp_path, "enforce", sink, HEALTHY * 2)
    assert [r.is_error for r in results] == [False] * 8
    assert len(tools_calls(tmp_path / "server.in")) == 8


@pytest.mark.parametrize("variable, file, text", [
    ("OTEL_LOOPGUARD_KILL_SWITCH_FILE", "kill", "observe\n"),  # the kill switch turns enforce into observe
    ("OTEL_LOOPGUARD_POLICY", "policy.yaml", "tools:\n  lookup_order:\n    enforce: false\n"),  # per-tool rollout
], ids=["kill_switch", "tool_left_observed"])
def test_a_file_that_says_observe_lets_every_repeat_through(tmp_path: Path, sink: Sink, variable: str, file: str,
                                                            text: str) -> None:
    """The kill switch file, or a policy leaving the tool observed (`enforce: false`): in enforce
    mode no call is answered by the proxy, all five reach the server."""
    path = tmp_path / file
    path.write_text(text)
    results = calls(tmp_path, "enforce", sink, REPEAT, **{variable: str(path)})
    assert [r.is_error for r in results] == [False] * 5
    assert len(tools_calls(tmp_path / "server.in")) == 5
