"""A real MCP server (the SDK's MCPServer, stdio) for the proxy's tests.

The server the MCP captures were recorded with (research/conventions/mcp_server.py: lookup_order,
search_docs, flaky_tool), plus big (a result of n KiB), slow (sleeps, reporting progress and
logging) and crash (the process exits at once, mid-call).
"""

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research" / "conventions"))
from mcp_server import build  # noqa: E402  (a script folder, not a package)

app = build()


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
