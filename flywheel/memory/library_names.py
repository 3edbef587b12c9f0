"""Libraries of verified solutions: the one spelling of a library's name (`template:<id>`, `topic:<topic>`,
a tenant's behind `<tenant>/`). A library groups solutions by template (or topic); every solution is
prefilled after its chain's current tail, so any prefix of a chain grafts exactly at its own positions.
"""

from __future__ import annotations

from galahad.flywheel.config import RetrievalPolicy


def template_library(template: str) -> str:
    return f"template:{template}"


def topic_library(topic: str) -> str:
    return f"topic:{topic}"


def library_name(problem: dict) -> str:
    """`template:<id>` when the problem has a template, else `topic:<topic>`; a tenant's problem's library is
    `<tenant>/` and that (`catalog.scopes.library_scope`)."""
    template = problem.get("template")
    name = template_library(template) if template else topic_library(problem.get("topic") or "general")
    scope = problem.get("scope")
    return name if scope in (None, "shared") else f"{scope}/{name}"  # a tenant's chains are its own


def candidate_libraries(policy: RetrievalPolicy, template: str | None, topic: str | None) -> list[str]:
    """The libraries a problem's transfer reads, in order: its template's (with `policy.scope` "template"),
    then its topic's."""
    names = [template_library(template)] if policy.scope == "template" and template else []
    return names + ([topic_library(topic)] if topic else [])
