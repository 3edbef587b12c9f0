"""Bundle format versions: which one this Galahad writes, which it reads, and what an older one lacks.

The version (`galahad-bundle/N`) is bumped whenever the bundle's tables change. Every version ever written
imports: an older row's columns added since are filled as their migration filled existing rows (`ADDED`);
any other missing column is malformed; a newer bundle is refused in one line naming both versions.

    1  artifacts and their provenance (2026-12-01; before migration 0003 without problems.gold_source)
    2  + recall rows, problem keys, runtime facts (`bundle_memory.py`) and migration 0004's artifact columns
       (2026-12-02); from 2026-12-06 (migration 0006) writers also put each row's scope, under the same name
    3  scope on every problems, artifacts and libraries row (2026-12-07)
    4  + attempts.provenance (migration 0009, 2026-12-07; older bundles' attempts are all `sampled`)

A bundle without scopes lands in `shared`, as migration 0006 did: only the admin imports, and an old
bundle's ids (text hashes) are shared ids anyway (`problems/scope_ids.py`).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from galahad.flywheel.errors import GalahadError


class Added(NamedTuple):
    table: str
    column: str
    default: Any  # what the migration gave existing rows
    migration: str
    always_from: int  # the first format version whose writers always put it


VERSION = 4
FORMAT = f"galahad-bundle/{VERSION}"
ADDED = (
    Added("problems", "gold_source", None, "0003", 2),
    Added("artifacts", "recompiled_from", None, "0004", 2),
    Added("artifacts", "extra", None, "0004", 2),
    Added("problems", "scope", "shared", "0006", 3),
    Added("artifacts", "scope", "shared", "0006", 3),
    Added("libraries", "scope", "shared", "0006", 3),
    Added("attempts", "provenance", "sampled", "0009", 4),
)
_FORMAT = re.compile(r"galahad-bundle/([1-9][0-9]{0,5})")


def version_of(manifest: Any, name: str) -> int:
    """The format version of a parsed manifest; refuses one that is not a bundle's, or newer than this."""
    fmt = manifest.get("format") if isinstance(manifest, dict) else None
    m = _FORMAT.fullmatch(fmt) if isinstance(fmt, str) else None
    if m is None:
        raise GalahadError(f"malformed bundle: manifest is not a galahad-bundle manifest (format {str(fmt)[:40]!r})")
    version = int(m.group(1))
    if version > VERSION:
        raise GalahadError(f"refusing bundle {name}: it is {fmt}, newer than this Galahad reads ({FORMAT}); "
                           "import it with a Galahad at least as new as the one that exported it")
    return version


def may_lack(table: str, version: int) -> dict[str, Any]:
    """{column: default} a row of `table` in a bundle of `version` may lack."""
    return {a.column: a.default for a in ADDED if a.table == table and version < a.always_from}


def complete(table: str, row: Any, version: int, defaulted: set[str]) -> Any:
    """`row` with the columns its version may lack filled in (each noted in `defaulted` as table.column);
    anything that is not a dict is returned as it is (refused by the caller's column check)."""
    if not isinstance(row, dict):
        return row
    fill = {c: v for c, v in may_lack(table, version).items() if c not in row}
    defaulted.update(f"{table}.{c}" for c in fill)
    return {**fill, **row}


def upgrade_line(version: int, defaulted: set[str]) -> str | None:
    """The one line an import of an older bundle prints (None for a current one)."""
    if version >= VERSION:
        return None
    cols = sorted(defaulted)
    scoped = any(c.endswith(".scope") for c in cols)
    return (f"bundle from an older catalog (galahad-bundle/{version}, this is {FORMAT}): {len(cols)} columns "
            "defaulted" + (f" ({', '.join(cols)})" if cols else "") + ("; its rows are in scope shared" if scoped else ""))
