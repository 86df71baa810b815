"""MCP `tools/call` spans as tool calls (research/conventions/FINDINGS.md, section 9).

The OpenTelemetry MCP conventions mark a request's span with `mcp.method.name`; a tool call's
span is `tools/call`, its tool in `gen_ai.tool.name`, its arguments and result (opt-in) in
`gen_ai.tool.call.arguments` / `gen_ai.tool.call.result`, the JSON-RPC id in
`jsonrpc.request.id`. Such a span with no content at all (the MCP SDK's own spans: neither
side records arguments or results) is not judged as a call: every call of a tool would look
the same, so a healthy session reads as a loop; one tagged by the processor is judged by its
digests.
"""

from __future__ import annotations

from typing import Any, Mapping

from .attributes import ARGS_DIGEST

METHOD = "mcp.method.name"
TOOLS_CALL = "tools/call"
SESSION_ID = "mcp.session.id"
PROTOCOL_VERSION = "mcp.protocol.version"
REQUEST_ID = "jsonrpc.request.id"
TOOL = "gen_ai.tool.name"
ARGUMENTS = ("gen_ai.tool.call.arguments",)
RESULT = ("gen_ai.tool.call.result",)
CALL_ID = (REQUEST_ID, "mcp.request.id")
CONTENT = (*ARGUMENTS, *RESULT, ARGS_DIGEST)


def contentless(attributes: Mapping[str, Any]) -> bool:
    """An MCP tool span that carries neither arguments, nor a result, nor the processor's
    digests: it tells one call of a tool from no other, so it is no call to judge."""
    return not any(key in attributes for key in CONTENT)

