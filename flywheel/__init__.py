"""Galahad's product layer: artifacts, the content-addressed store, the SQL catalog, the learning loop, evals, CLI.

It may know about torch tensors (artifacts are tensors) but never about Ray internals beyond the
`galahad.workers` actors it drives.
"""
