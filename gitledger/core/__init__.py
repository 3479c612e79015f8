"""The domain: keys, events and their fold, the store and check ports, policy, the step protocol.

Imports only the standard library and itself (an import-linter contract in pyproject.toml).
"""
