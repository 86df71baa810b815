"""A real MCP SDK client calls a real MCP SDK server (mcp_server.py) over stdio; both sides'
spans are captured (not part of the package; no network).

Usage: python mcp_run.py --instr {sdk,openllmetry,openinference} --scenario {healthy,repeat,errors}

sdk:           the SDK's own spans only (mcp >= 2 traces every request: client `MCP send <method>`,
               server `<method> <tool>` through its OpenTelemetry middleware)
openllmetry:   plus OpenLLMetry's McpInstrumentor on both sides
openinference: plus OpenInference's MCPInstrumentor on both sides (context propagation only)

Writes mcp_captures/mcp_<instr>__<scenario>.json (client and server spans in one file, each
span's "side" said in its row) and a .tree.txt beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = {
    "healthy": [("lookup_order", {"order_id": "A-1"}), ("search_docs", {"query": "refund policy"}),
                ("lookup_order", {"order_id": "B-2"}), ("search_docs", {"query": "shipping times"})],
    "repeat": [("lookup_order", {"order_id": "A-1"})] * 5,
    "errors": [("flaky_tool", {"x": 1}), ("lookup_order", {"order_id": "A-1"})],
}
VERSIONS = ["mcp", "mcp-types", "opentelemetry-sdk", "opentelemetry-api", "opentelemetry-instrumentation-mcp",
            "openinference-instrumentation-mcp", "opentelemetry-semantic-conventions-ai"]


def instrument(instr: str) -> str:
    """Instrument this process; the error text when the instrumentation refuses."""
    try:
        if instr == "openllmetry":
            from opentelemetry.instrumentation.mcp import McpInstrumentor
            McpInstrumentor().instrument()
        elif instr == "openinference":
            from openinference.instrumentation.mcp import MCPInstrumentor
            MCPInstrumentor().instrument()
    except Exception as exc:  # recorded in the capture: the quirk is the finding
        return f"{type(exc).__name__}: {exc}"
    return ""


async def session(calls, server_env) -> list:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[os.path.join(HERE, "mcp_server.py")], env=server_env)
    results = []
    # An agent's own span around the session: without one every request is a trace of its own
    # (the SDK opens no session span), so the calls of one session share no run (FINDINGS.md).
    from opentelemetry import trace

    with trace.get_tracer("mcp_run").start_as_current_span("agent session"):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                await client.list_tools()
                for name, arguments in calls:
                    result = await client.call_tool(name, arguments)
                    results.append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", required=True, choices=["sdk", "openinference", "openllmetry"])
    ap.add_argument("--scenario", required=True, choices=list(SCENARIOS))
    args = ap.parse_args()
    import anyio

    _provider, exporter, recorder = common.setup()
    refused = instrument(args.instr)
    with tempfile.TemporaryDirectory() as tmp:
        server_out = os.path.join(tmp, "server.json")
        env = {**os.environ, "MCP_CAPTURE_OUT": server_out, "MCP_CAPTURE_INSTR": args.instr}
        with common.Timer() as t_run:
            results = anyio.run(session, SCENARIOS[args.scenario], env)
        with open(server_out) as f:
            server = json.load(f)
    name = f"mcp_{args.instr}__{args.scenario}"
    path = os.path.join(HERE, "mcp_captures", name + ".json")
    meta = {"combo": f"mcp_{args.instr}", "scenario": args.scenario, "python": common.python_version(),
            "versions": common.versions(VERSIONS), "instrument_error": refused,
            "calls": [[n, a] for n, a in SCENARIOS[args.scenario]], "results": results, "run_seconds": t_run.seconds}
    rows = common.dump(path, exporter, recorder, meta)
    for row in rows:
        row["side"] = "client"
    for row in server["spans"]:
        row["side"] = "server"
    doc = {"meta": meta, "span_count": len(rows) + len(server["spans"]), "spans": rows + server["spans"]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, default=str)
        f.write("\n")
    with open(path[:-5] + ".tree.txt", "w") as f:
        f.write("client:\n" + common.tree(rows) + "\nserver:\n" + common.tree(server["spans"]) + "\n")
    print(name, "client spans:", len(rows), "server spans:", len(server["spans"]), "refused:", refused or "-")


if __name__ == "__main__":
    main()
