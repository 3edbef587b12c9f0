"""Artifacts: the byte format, the content-addressed store, and loading chains from it."""
