"""Libraries of verified solutions: how a problem names the library its solution is deposited into.

A library groups solutions by template (or topic when there is no template). Its chains are persistent
prefix trees of segments: every solution is prefilled after the chain's current tail, so any prefix of
a chain grafts exactly at its own positions.
"""

from __future__ import annotations


def library_name(problem: dict) -> str:
    """`template:<id>` when the problem has a template, else `topic:<topic>`; a tenant's problem's library is
    `<tenant>/` and that (`catalog.scopes.library_scope`)."""
    name = f"template:{problem['template']}" if problem.get("template") else f"topic:{problem.get('topic') or 'general'}"
    scope = problem.get("scope")
    return name if scope in (None, "shared") else f"{scope}/{name}"  # a tenant's chains are its own
