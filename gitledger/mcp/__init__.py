"""The MCP adapter of ``gitledger mcp-proxy``: :mod:`.relay`, a raw JSON-RPC relay (standard library
only; gitledger imports no MCP SDK), and the packaged profiles (``profiles/*.yaml``).

Importing this package only names where the packaged profiles live.
"""

from __future__ import annotations

from pathlib import Path

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
