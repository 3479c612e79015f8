"""The agent guard: gitledger in front of an AI coding agent's own tool calls (docs/agents.md)."""
