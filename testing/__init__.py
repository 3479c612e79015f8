"""Test doubles and helpers importable by tests/, benchmarks/ and examples/ (as pre-commit's testing/)."""
