"""The MCP proxy's guarding logic (``gitledger mcp-proxy``), independent of the MCP SDK.

:mod:`.guard` decides and records guarded tool calls with the step protocol; :mod:`.profiles`
resolves a profile (built-in YAML, extended from .gitledger.yml); :mod:`.templates` reads the JSON
in tool results. The SDK adapter lives in :mod:`gitledger.mcp`.
"""
