"""A minimal MCP server written by hand (no SDK), for what the SDK never sends: batches,
malformed lines, an exit on request. One JSON-RPC message (or batch) a line.

tools/call names: echo (the arguments back as text), garbage (a line that is not JSON first,
then the answer), exit (exits with code 3 without answering), hang (never answers).
"""

import json
import sys


def answer(message):
    if not isinstance(message, dict) or "method" not in message:
        return None
    method, rid = message["method"], message.get("id")
    if method == "initialize":
        return {"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                                        "serverInfo": {"name": "raw", "version": "0"}}}
    if method == "tools/call":
        name = message["params"]["name"]
        if name == "exit":
            sys.exit(3)
        if name == "hang":
            return None
        if name == "garbage":
            sys.stdout.write("{this is not json\n")
        text = json.dumps(message["params"].get("arguments"), sort_keys=True)
        return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}], "isError": False}}
    if "id" in message:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}}
    return None


def main():
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            out = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        else:
            if isinstance(message, list):
                out = [a for a in (answer(m) for m in message) if a is not None] or None
            else:
                out = answer(message)
        if out is not None:
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
