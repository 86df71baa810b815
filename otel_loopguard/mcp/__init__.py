"""`otel-loopguard mcp-proxy`: a proxy between an MCP client and an MCP server (stdio).

Every JSON-RPC message passes through byte for byte; each `tools/call` becomes a tool span
(the MCP and GenAI conventions, the session as the run) that the processor tags as install()
does; in enforce mode the guard may answer a looping call itself (docs/mcp.md). Order of the
modules: `framing` (bytes -> lines -> messages), `messages` (what the proxy writes itself),
`spans` (one span per call), `session` (the decisions, no I/O), `proxy` (the pipes),
`command` (the CLI).
"""
