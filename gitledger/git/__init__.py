"""The git adapter: the only package that starts git (plumbing, the notes store, sync, git checks)."""
