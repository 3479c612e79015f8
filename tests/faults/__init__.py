"""The reliability and security suite (issue 7): crash matrix, stress, bad inputs, corruption.

Default runs are bounded to a few minutes on two cores; ``GITLEDGER_STRESS=full`` selects the full
sizes. ``GITLEDGER_RELIABILITY_REPORT=PATH`` writes the figures to PATH (see ``tests/faults/report.py``).
"""
