"""The MCP adapter of ``gitledger mcp-proxy``: the only package that imports the ``mcp`` SDK.

Importing this package does not import the SDK (``gitledger.mcp.proxy`` does); it only names where
the packaged profiles live.
"""

from __future__ import annotations

from pathlib import Path

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
