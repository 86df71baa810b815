"""A real MCP server (the SDK's MCPServer, stdio) for the proxy's tests.

Tools: lookup_order, search_docs, big (a result of n KiB), slow (sleeps, reporting progress and
logging), crash (the process exits at once, mid-call), exit_after (answers, then exits).
"""

import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer

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
def big(kib: int) -> str:
    """A long result."""
    return ("0123456789abcdef" * 64) * kib


@app.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleeps, reporting progress and logging on the way."""
    for step in range(4):
        await ctx.report_progress(step, 4)
        await ctx.info(f"step {step}")
        await asyncio.sleep(seconds / 4)
    return "done"


@app.tool()
def crash(code: int) -> str:
    """The server dies mid-call."""
    os._exit(code)


if __name__ == "__main__":
    app.run()
