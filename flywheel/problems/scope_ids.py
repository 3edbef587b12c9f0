"""Memory scopes: every problem (and what hangs off it) belongs to one tenant's scope or to `shared`.

`shared` holds the built-in families, admin imports and promoted knowledge; a problem's id there is the
hash of its normalized text (`records.problem_hash`), as it always was. A tenant's problem gets an id of
its own, derived from the scope and that hash, so the same text learned by two tenants is two rows that
never collide, and no id of one tenant's names a row of another's.
"""

from __future__ import annotations

import hashlib
import re

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.records import problem_hash

SHARED = "shared"
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")  # a tenant's name, and so its scope


def check_scope(scope: str) -> str:
    if scope != SHARED and not (isinstance(scope, str) and NAME.fullmatch(scope)):
        raise GalahadError(f"not a scope name (lowercase letters, digits, '-', '_', at most 40): {str(scope)[:60]!r}")
    return scope


def scoped_id(text: str, scope: str = SHARED) -> str:
    """The id of `text`'s problem in `scope`: its text hash in `shared`, else a hash of scope and text hash."""
    return scoped_hash_id(problem_hash(text), scope)


def scoped_hash_id(h: str, scope: str = SHARED) -> str:
    """`scoped_id` from the text's hash (what routing already holds)."""
    if scope == SHARED:
        return h
    return hashlib.sha256(f"galahad-scope\x00{check_scope(scope)}\x00{h}".encode()).hexdigest()


def library_scope(name: str) -> str:
    """The scope a library name belongs to: `<tenant>/...` a tenant's, anything else shared's."""
    head, sep, _ = name.partition("/")
    return head if sep and NAME.fullmatch(head) and head != SHARED else SHARED


def scoped_library(name: str, scope: str | None) -> str:
    return name if scope in (None, SHARED) else f"{scope}/{name}"
