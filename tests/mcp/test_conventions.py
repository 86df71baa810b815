"""MCP `tools/call` spans: recognised as tool calls when they carry content, never judged when
they carry none (the MCP SDK's own spans: research/conventions/mcp_captures/)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from otel_loopguard.conventions import ToolSpan, recognise
from otel_loopguard.conventions.mcp import contentless

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "research" / "conventions" / "mcp_captures"
SDK_CAPTURES = sorted(p for p in CAPTURES.glob("mcp_*.json") if not p.name.startswith("mcp_proxy"))

SEMCONV = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
           "jsonrpc.request.id": "7", "mcp.session.id": "s-1"}


def test_a_semconv_tool_span_with_content_is_a_call_of_the_mcp_convention() -> None:
    found = recognise({**SEMCONV, "gen_ai.tool.call.arguments": '{"order_id": "A-1"}',
                       "gen_ai.tool.call.result": '{"status": "pending"}'})
    assert isinstance(found, ToolSpan)
    assert (found.convention, found.tool, found.call_id) == ("mcp", "lookup_order", "7")
    assert found.arguments == '{"order_id": "A-1"}' and found.result == '{"status": "pending"}'
    assert found.error is False


def test_a_tool_error_result_is_an_error() -> None:
    found = recognise({**SEMCONV, "gen_ai.tool.call.arguments": "{}", "error.type": "tool_error"})
    assert isinstance(found, ToolSpan) and found.error


def test_a_span_without_content_is_no_call_and_one_argument_makes_it_one() -> None:
    """Mutation check: the same span with its arguments is a call; without, it is none (it
    would otherwise be a GenAI execute_tool span of no arguments)."""
    assert contentless(SEMCONV) and recognise(SEMCONV) is None
    assert isinstance(recognise({**SEMCONV, "gen_ai.tool.call.arguments": "{}"}), ToolSpan)
    assert isinstance(recognise({**SEMCONV, "loopguard.args.digest": "0" * 32}), ToolSpan)  # tagged, payload redacted
    without_mcp = {k: v for k, v in SEMCONV.items() if not k.startswith("mcp.")}
    assert isinstance(recognise(without_mcp), ToolSpan)  # a plain GenAI tool span is still a call


def test_other_mcp_methods_are_not_calls() -> None:
    for method in ("initialize", "tools/list", "notifications/initialized", "resources/read"):
        assert recognise({"mcp.method.name": method, "gen_ai.tool.call.arguments": "{}"}) is None


@pytest.mark.parametrize("capture", SDK_CAPTURES, ids=lambda p: p.stem)
def test_the_sdk_spans_are_never_judged(capture: Path) -> None:
    """The MCP SDK's own spans carry no arguments or results on either side: before this
    convention the server's `execute_tool` spans made the healthy session a cycle."""
    spans = json.loads(capture.read_text())["spans"]
    tool_spans = [s for s in spans if s["attributes"].get("mcp.method.name") == "tools/call"]
    assert len(tool_spans) >= 4  # client and server side of every call
    assert [recognise(s["attributes"], s["status"]["code"] == "ERROR", s["name"]) for s in tool_spans] == \
        [None] * len(tool_spans)


def test_audit_finds_no_run_in_the_sdk_captures(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import captures_to_otlp

    from otel_loopguard.audit import audit

    healthy = captures_to_otlp.convert(CAPTURES / "mcp_sdk__healthy.json", tmp_path)
    assert [r.findings for r in audit([healthy], None)] == []
