"""The retrieval policy: which library a new problem draws on, and which prefix of it is grafted.

One definition for `solve` and the evals: the first `max_solutions` solutions of the library's newest
chain (any prefix of a chain grafts exactly at its own positions). The policies' fields and defaults
(`RetrievalPolicy`, `RecallPolicy`) live in `flywheel/config.py`; this module applies them to a catalog.
"""

from __future__ import annotations

from galahad.flywheel.config import RecallPolicy, RetrievalPolicy

__all__ = ["RecallPolicy", "RetrievalPolicy", "first_library_chain", "library_prefix"]


def first_library_chain(catalog, libraries: list[str], n: int,
                        fingerprints: tuple[str, str]) -> tuple[str, str] | None:
    """(library, tail artifact) of the first n solutions of the newest chain made under `fingerprints` (the
    engine's model, runtime) of the first of `libraries` that has one; None when none has. One catalog
    statement for all of them (`Libraries.first_chain`)."""
    found = catalog.libraries.first_chain(libraries, fingerprints)
    return (found[0], found[1][:n][-1]) if found else None


def library_prefix(catalog, library: str, n: int, fingerprints: tuple[str, str] | None = None) -> str | None:
    """The tail artifact of the first n solutions of the library's newest chain (None: empty library).
    With `fingerprints` (the engine's model, runtime): the newest chain made under them."""
    chain = catalog.libraries.chain(library, fingerprints=fingerprints)
    return chain[:n][-1] if chain else None
