"""The duplicate-PR audit: evidence, trailers, the ledger view, closing, the run and its summary."""
