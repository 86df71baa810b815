"""A real MCP server (the SDK's MCPServer over stdio) for the MCP captures (not part of the package).

Tools: lookup_order(order_id), search_docs(query), flaky_tool(x) (raises: an isError result).
With MCP_CAPTURE_OUT set, the server's own spans (the SDK's OpenTelemetry middleware and, with
MCP_CAPTURE_INSTR, an instrumentation's) are dumped there in common.py's format at exit.
"""

from __future__ import annotations

import atexit
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _capture(out: str, instr: str) -> None:
    import common

    _provider, exporter, recorder = common.setup()
    if instr == "openllmetry":
        from opentelemetry.instrumentation.mcp import McpInstrumentor
        McpInstrumentor().instrument()
    elif instr == "openinference":
        from openinference.instrumentation.mcp import MCPInstrumentor
        MCPInstrumentor().instrument()
    atexit.register(lambda: common.dump(out, exporter, recorder, {"side": "server", "instr": instr}))


def build():
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("orders")

    @app.tool()
    def lookup_order(order_id: str) -> dict:
        """Look up an order by id."""
        return {"order_id": order_id, "status": "pending" if order_id == "A-1" else "shipped"}

    @app.tool()
    def search_docs(query: str) -> str:
        """Search the help pages."""
        return f"3 pages match {query!r}"

    @app.tool()
    def flaky_tool(x: int) -> str:
        """Always fails."""
        raise RuntimeError(f"upstream timeout for x={x}")

    return app


if __name__ == "__main__":
    if os.environ.get("MCP_CAPTURE_OUT"):
        _capture(os.environ["MCP_CAPTURE_OUT"], os.environ.get("MCP_CAPTURE_INSTR", "sdk"))
    build().run()
