"""The MCP proxy's guarding logic (``gitledger mcp-proxy``), independent of its transport.

:mod:`.guard` decides and records guarded tool calls with the step protocol; :mod:`.profiles`
resolves a profile (built-in YAML, extended from .gitledger.yml); :mod:`.templates` reads the JSON
in tool results. The transport (a raw JSON-RPC relay) is :mod:`gitledger.mcp.relay`.
"""
