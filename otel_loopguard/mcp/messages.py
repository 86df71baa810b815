"""The few messages the proxy writes itself, each one JSON line."""

from __future__ import annotations

import json
from typing import Any

ARGUMENTS_SHOWN = 200  # characters of the repeated call's arguments quoted back to the model
SERVER_GONE = -32000  # JSON-RPC's implementation-defined server error range


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def tool_error(request_id: Any, text: str) -> bytes:
    """A tools/call answered with an MCP tool error: the model reads `text` as the result."""
    result = {"content": [{"type": "text", "text": text}], "isError": True}
    return line({"jsonrpc": "2.0", "id": request_id, "result": result})


def rpc_error(request_id: Any, code: int, message: str) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def denial_text(message: str, tool: str, arguments: Any) -> str:
    """The guard's text, then the call it refused, so the model sees what it repeated."""
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    if len(shown) > ARGUMENTS_SHOWN:
        shown = shown[:ARGUMENTS_SHOWN] + "..."
    return f"{message} The refused call: {tool} with arguments {shown}."
