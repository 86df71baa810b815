"""Run `phoenix serve` with its OTLP/gRPC port bound to loopback only.

Phoenix 20.x binds its HTTP port to PHOENIX_HOST, but its OTLP/gRPC server always binds
`[::]:<PHOENIX_GRPC_PORT>` (phoenix/server/grpc_server.py), i.e. every interface, and has no
setting for the host. The end-to-end test must stay on loopback, so this launcher rewrites
the host of every port a gRPC aio server adds to 127.0.0.1, then runs Phoenix's own entry
point (`phoenix serve` == phoenix.server.main:main) in this process.

Usage: python _phoenix_loopback.py serve
"""

from __future__ import annotations

import sys
from typing import Any

import grpc.aio

_make_server = grpc.aio.server


def _loopback(address: str) -> str:
    return "127.0.0.1:" + address.rsplit(":", 1)[1]


def _loopback_server(*args: Any, **kwargs: Any) -> Any:
    server = _make_server(*args, **kwargs)
    insecure, secure = server.add_insecure_port, server.add_secure_port
    server.add_insecure_port = lambda address: insecure(_loopback(address))
    server.add_secure_port = lambda address, credentials: secure(_loopback(address), credentials)
    return server


grpc.aio.server = _loopback_server

if __name__ == "__main__":
    from phoenix.server.main import main

    sys.argv[0] = "phoenix"
    sys.exit(main())
