"""The retrieval policy: which library a new problem draws on, and which prefix of it is grafted.

One definition for `solve` and the evals: the first `max_solutions` solutions of the library's newest
chain (any prefix of a chain grafts exactly at its own positions).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetrievalPolicy:
    """How the transfer path picks memory: the first `max_solutions` of the newest chain of a library."""

    max_solutions: int = 8
    scope: str = "template"  # or "topic"

    def libraries(self, template: str | None, topic: str | None) -> list[str]:
        names = []
        if self.scope == "template" and template:
            names.append(f"template:{template}")
        if topic:
            names.append(f"topic:{topic}")
        return names


@dataclass(frozen=True)
class RecallPolicy:
    """How a new problem finds a verified one posed in other words: by canonical key, else by text
    similarity (at least `similar_min`) among problems with the same numbers in the same order; and how
    many solutions the `nearest` memory of `eval transfer` composes."""

    similar_min: float = 0.75
    nearest_k: int = 4


def library_prefix(catalog, library: str, n: int, fingerprints: tuple[str, str] | None = None) -> str | None:
    """The tail artifact of the first n solutions of the library's newest chain (None: empty library).
    With `fingerprints` (the engine's model, runtime): the newest chain made under them."""
    chain = catalog.library_chain(library, fingerprints=fingerprints)
    return chain[:n][-1] if chain else None
