"""Libraries of verified solutions: how a problem names the library its solution is deposited into.

A library groups solutions by template (or topic when there is no template). Its chains are persistent
prefix trees of segments: every solution is prefilled after the chain's current tail, so any prefix of
a chain grafts exactly at its own positions.
"""

from __future__ import annotations


def library_name(problem: dict) -> str:
    """`template:<id>` when the problem has a template, else `topic:<topic>`."""
    if problem.get("template"):
        return f"template:{problem['template']}"
    return f"topic:{problem.get('topic') or 'general'}"
