"""The test server (server.py's tools) over streamable HTTP: python http_server.py PORT.

`executed` answers how many lookup_order calls this server has run (what reached it)."""

import sys

from server import app

EXECUTED = {"lookup_order": 0}


@app.tool()
def counted_lookup(order_id: str) -> dict:
    """lookup_order, counted."""
    EXECUTED["lookup_order"] += 1
    return {"order_id": order_id, "status": "pending"}


@app.tool()
def executed() -> int:
    """How many counted_lookup calls ran here."""
    return EXECUTED["lookup_order"]


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
