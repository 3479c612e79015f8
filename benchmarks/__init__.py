"""gitledger benchmarks: per-step overhead, whole-process latency, concurrency, profiles.

Run them all with ``python benchmarks/run.py [--quick] [--out DIR]``; see ``benchmarks/README.md``.
"""
