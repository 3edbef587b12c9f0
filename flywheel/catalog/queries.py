"""Read-side catalog queries (mixed into `Catalog`): lookups, lineage, libraries, stats.

Rows come back as plain dicts (column name -> value; datetimes are naive UTC), so callers never hold a
session and `--json` output is one `json.dumps` away. Artifact listings leave out `token_ids` (up to tens
of KB per row); `artifact(id)` returns the full row.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Engine, and_, func, or_, select, text

from galahad.flywheel.artifacts.chain import walk
from galahad.flywheel.artifacts.store import check_id
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.records import problem_hash

P, R, A, V, ART, ENT = (TABLES[t] for t in ("problems", "runs", "attempts", "verifications", "artifacts",
                                             "library_entries"))
ART_LIGHT = [c for c in ART.c if c.name != "token_ids"]
_PREFIX = re.compile(r"^[0-9a-f]{8,64}$")


Fingerprints = tuple[str, str]  # (model fingerprint, runtime fingerprint) of the running engine


def _made_under(fingerprints: Fingerprints):
    """Artifacts made by that model under that runtime: the only ones a graft or an extension may use."""
    model, runtime = fingerprints
    return and_(ART.c.model_fingerprint == model, ART.c.runtime_fingerprint == runtime)


def _rows(result) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in result]


def _one(result) -> dict[str, Any] | None:
    r = result.first()
    return None if r is None else dict(r._mapping)


def _prefix(col, prefix: str):
    # A range the primary-key index can serve; hex ids sort between `prefix` and `prefix + "g"`.
    return and_(col >= prefix, col < prefix + "g", col.startswith(prefix))


class Queries:
    engine: Engine

    # -- problems ----------------------------------------------------------------------------------

    def problem_by_hash(self, h: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            return _one(conn.execute(select(P).where(P.c.id == h)))

    def problems_by_ids(self, ids: list[str]) -> list[dict[str, Any]]:
        """The rows of those problem ids that exist here (bundle import checks conflicts with them)."""
        out: list[dict[str, Any]] = []
        with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                out += _rows(conn.execute(select(P).where(P.c.id.in_(ids[i:i + 500]))))
        return out

    def problem(self, problem_id: str) -> dict[str, Any]:
        row = self.problem_by_hash(problem_id)
        if row is None:
            raise GalahadError(f"unknown problem {str(problem_id)[:80]!r}")
        return row

    def find_problems(
        self, text: str | None = None, hash: str | None = None, topic: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Problems matching all given filters: text (same normalized hash, or substring), hash (or a
        prefix of at least 8 hex chars), topic (topic or template name)."""
        conds = []
        if text is not None:
            conds.append(or_(P.c.id == problem_hash(text),
                             func.lower(P.c.text).contains(text.lower(), autoescape=True)))
        if hash is not None:
            if not _PREFIX.match(hash):
                raise GalahadError(f"not a problem hash or prefix (8-64 lowercase hex chars): {hash[:80]!r}")
            conds.append(_prefix(P.c.id, hash))
        if topic is not None:
            conds.append(or_(P.c.topic == topic, P.c.template == topic))
        stmt = select(P).where(*conds).order_by(P.c.created_at, P.c.id).limit(int(limit))
        with self.engine.connect() as conn:
            return _rows(conn.execute(stmt))

    def attempts_for(self, problem_id: str) -> list[dict[str, Any]]:
        """Attempts on a problem, each with its verdicts (`verifications`, newest last)."""
        with self.engine.connect() as conn:
            attempts = _rows(conn.execute(select(A).where(A.c.problem_id == problem_id)
                                          .order_by(A.c.created_at, A.c.id)))
            for a in attempts:
                a["verifications"] = _rows(conn.execute(select(V).where(V.c.attempt_id == a["id"])
                                                        .order_by(V.c.created_at, V.c.id)))
        return attempts

    def verified_solution(self, problem_id: str, fingerprints: Fingerprints | None = None) -> dict[str, Any] | None:
        """The best verified attempt: one with a deposited artifact first, then fewest tokens, then oldest.
        The attempt's columns plus verification_id, verifier_version and artifact_id (or None). With
        `fingerprints` (model, runtime), only an artifact made under them counts as deposited."""
        on = ART.c.verification_id == V.c.id
        if fingerprints is not None:
            on = and_(on, _made_under(fingerprints))
        stmt = (
            select(A, V.c.id.label("verification_id"), V.c.verifier_version, ART.c.id.label("artifact_id"))
            .join(V, V.c.attempt_id == A.c.id)
            .outerjoin(ART, on)
            .where(A.c.problem_id == problem_id, V.c.verified.is_(True))
            .order_by(ART.c.id.is_(None), A.c.tokens, A.c.created_at, A.c.id)
            .limit(1)
        )
        with self.engine.connect() as conn:
            return _one(conn.execute(stmt))

    # -- artifacts ---------------------------------------------------------------------------------

    def artifact(self, artifact_id: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = _one(conn.execute(select(ART).where(ART.c.id == check_id(artifact_id))))
        if row is None:
            raise GalahadError(f"unknown artifact {artifact_id}")
        return row

    def has_artifact(self, artifact_id: str) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(ART.c.id).where(ART.c.id == artifact_id)).first() is not None

    def artifacts(self, limit: int = 100, library: str | None = None) -> list[dict[str, Any]]:
        """Newest first (or a library's chains in order), without token_ids."""
        if library is None:
            stmt = select(*ART_LIGHT).order_by(ART.c.created_at.desc(), ART.c.id).limit(int(limit))
        else:
            stmt = (select(*ART_LIGHT, ENT.c.chain_index, ENT.c.position).join(ENT, ENT.c.artifact_id == ART.c.id)
                    .where(ENT.c.library == library).order_by(ENT.c.chain_index, ENT.c.position).limit(int(limit)))
        with self.engine.connect() as conn:
            return _rows(conn.execute(stmt))

    def artifact_sizes(self) -> dict[str, int]:
        """Every artifact id with its recorded size (fsck, gc, export)."""
        with self.engine.connect() as conn:
            return {r.id: r.size for r in conn.execute(select(ART.c.id, ART.c.size))}

    def resolve(self, ref: str) -> tuple[str, str]:
        """('artifact' | 'problem', full id) for a full id or a unique prefix of at least 8 hex chars."""
        if not isinstance(ref, str) or not _PREFIX.match(ref):
            raise GalahadError(f"not an id or id prefix (8-64 lowercase hex chars): {str(ref)[:80]!r}")
        with self.engine.connect() as conn:
            hits = [("artifact", r.id) for r in conn.execute(select(ART.c.id).where(_prefix(ART.c.id, ref)).limit(2))]
            hits += [("problem", r.id) for r in conn.execute(select(P.c.id).where(_prefix(P.c.id, ref)).limit(2))]
        if not hits:
            raise GalahadError(f"unknown id {ref}")
        if len(hits) > 1:
            raise GalahadError(f"ambiguous id prefix {ref}: matches {len(hits)}+ rows; give more characters")
        return hits[0]

    def lineage(self, artifact_id: str) -> dict[str, Any]:
        """artifact -> verification -> attempt -> problem (and run), its parent chain up to the root, and the
        libraries that hold it. Missing links are None (e.g. an artifact deposited without a verification)."""
        art = self.artifact(artifact_id)
        art_light = {k: v for k, v in art.items() if k != "token_ids"}
        out: dict[str, Any] = {"artifact": art_light, "verification": None, "attempt": None, "problem": None,
                               "run": None, "parents": [], "libraries": []}
        with self.engine.connect() as conn:
            if art["verification_id"]:
                out["verification"] = _one(conn.execute(select(V).where(V.c.id == art["verification_id"])))
                out["attempt"] = _one(conn.execute(select(A).where(A.c.id == out["verification"]["attempt_id"])))
                out["problem"] = _one(conn.execute(select(P).where(P.c.id == out["attempt"]["problem_id"])))
                if out["attempt"]["run_id"]:
                    out["run"] = _one(conn.execute(select(R).where(R.c.id == out["attempt"]["run_id"])))
            if art["parent_id"] is not None:  # the one bounded parent walk: a cycle or an endless chain is refused
                out["parents"] = walk(art["parent_id"], lambda cur: _one(conn.execute(
                    select(*ART_LIGHT).where(ART.c.id == cur))), lambda row: row["parent_id"])[::-1]  # nearest first
            out["libraries"] = _rows(conn.execute(select(ENT.c.library, ENT.c.chain_index, ENT.c.position)
                                                  .where(ENT.c.artifact_id == art["id"])))
        return out

    # -- libraries ---------------------------------------------------------------------------------

    def _chain_index(self, conn, name: str, chain_index: int | None, fingerprints: Fingerprints | None = None
                     ) -> int | None:
        if chain_index is not None:
            return chain_index
        stmt = select(func.max(ENT.c.chain_index)).where(ENT.c.library == name)
        if fingerprints is not None:
            stmt = stmt.join(ART, ART.c.id == ENT.c.artifact_id).where(_made_under(fingerprints))
        return conn.execute(stmt).scalar()

    def library_chain(self, name: str, chain_index: int | None = None,
                      fingerprints: Fingerprints | None = None) -> list[str]:
        """Artifact ids of one chain in order (default: the current, highest-numbered chain). With
        `fingerprints` (model, runtime): the current chain among those made under them, and only its
        artifacts made under them: what a graft may use (another model's chains never block it)."""
        with self.engine.connect() as conn:
            idx = self._chain_index(conn, name, chain_index, fingerprints)
            if idx is None:
                return []
            stmt = select(ENT.c.artifact_id).where(ENT.c.library == name, ENT.c.chain_index == idx)
            if fingerprints is not None:
                stmt = stmt.join(ART, ART.c.id == ENT.c.artifact_id).where(_made_under(fingerprints))
            return list(conn.execute(stmt.order_by(ENT.c.position)).scalars())

    def library_slot(self, name: str, chain_index: int, position: int) -> str | None:
        """The artifact at one position of one chain of a library, or None."""
        with self.engine.connect() as conn:
            return conn.execute(select(ENT.c.artifact_id).where(
                ENT.c.library == name, ENT.c.chain_index == chain_index, ENT.c.position == position)).scalar()

    def library_chains(self, name: str) -> list[list[str]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(ENT.c.chain_index, ENT.c.artifact_id).where(ENT.c.library == name)
                                .order_by(ENT.c.chain_index, ENT.c.position)).all()
        chains: dict[int, list[str]] = {}
        for r in rows:
            chains.setdefault(r.chain_index, []).append(r.artifact_id)
        return [chains[k] for k in sorted(chains)]

    def library_tail(self, name: str, chain_index: int | None = None,
                     fingerprints: Fingerprints | None = None) -> dict[str, Any] | None:
        """The last artifact of a chain (default: the current chain) with its chain_index and position.
        With `fingerprints` (model, runtime): of the current chain made under them (what a deposit extends)."""
        with self.engine.connect() as conn:
            idx = self._chain_index(conn, name, chain_index, fingerprints)
            if idx is None:
                return None
            stmt = (select(*ART_LIGHT, ENT.c.chain_index, ENT.c.position).join(ENT, ENT.c.artifact_id == ART.c.id)
                    .where(ENT.c.library == name, ENT.c.chain_index == idx))
            if fingerprints is not None:
                stmt = stmt.where(_made_under(fingerprints))
            return _one(conn.execute(stmt.order_by(ENT.c.position.desc()).limit(1)))

    def libraries(self) -> list[dict[str, Any]]:
        """Each library with chains, artifacts, stored_tokens and bytes (the `library_tokens` view)."""
        with self.engine.connect() as conn:
            return _rows(conn.execute(text("SELECT * FROM library_tokens ORDER BY library")))

    def problem_groups(self) -> list[dict[str, Any]]:
        """One example text per (template, topic) among the catalog's problems (classifying a new one)."""
        stmt = select(P.c.template, P.c.topic, func.min(P.c.text).label("text")).group_by(P.c.template, P.c.topic)
        with self.engine.connect() as conn:
            return _rows(conn.execute(stmt))

    def artifact_graph(self) -> list[dict[str, Any]]:
        """Every artifact's id, parent, token counts, size and fingerprints (no token ids, no bytes)."""
        cols = (ART.c.id, ART.c.parent_id, ART.c.n_tokens, ART.c.token_end, ART.c.size, ART.c.model_fingerprint,
                ART.c.runtime_fingerprint)
        with self.engine.connect() as conn:
            return _rows(conn.execute(select(*cols)))

    # -- runs and stats ----------------------------------------------------------------------------

    def run(self, run_id: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = _one(conn.execute(select(R).where(R.c.id == run_id)))
        if row is None:
            raise GalahadError(f"unknown run {str(run_id)[:80]!r}")
        return row

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return _rows(conn.execute(select(R).order_by(R.c.started_at.desc()).limit(int(limit))))

    def events(self) -> list[tuple[float, str]]:
        """(unix time, "verified" | "deposited"): each problem once, when first verified; each artifact."""
        first_verified = (select(func.min(V.c.created_at)).join(A, V.c.attempt_id == A.c.id)
                          .where(V.c.verified.is_(True)).group_by(A.c.problem_id))
        with self.engine.connect() as conn:
            verified = [r[0] for r in conn.execute(first_verified)]
            deposited = [r[0] for r in conn.execute(select(ART.c.created_at))]
        return [(t.timestamp(), "verified") for t in verified] + [(t.timestamp(), "deposited") for t in deposited]

    def stats(self) -> dict[str, Any]:
        """problems, verified (problems with an accepted attempt), artifacts, stored_tokens, bytes, and more."""
        with self.engine.connect() as conn:
            def scalar(stmt) -> int:
                return int(conn.execute(stmt).scalar() or 0)

            by_status = {r.status: int(r.n) for r in conn.execute(
                select(P.c.status, func.count().label("n")).group_by(P.c.status))}
            return {
                "problems": sum(by_status.values()),
                "verified": scalar(select(func.count(func.distinct(A.c.problem_id)))
                                   .join(V, V.c.attempt_id == A.c.id).where(V.c.verified.is_(True))),
                "artifacts": scalar(select(func.count()).select_from(ART)),
                "stored_tokens": scalar(select(func.sum(ART.c.n_tokens))),
                "bytes": scalar(select(func.sum(ART.c.size))),
                "by_status": by_status,
                "attempts": scalar(select(func.count()).select_from(A)),
                "verifications": scalar(select(func.count()).select_from(V)),
                "libraries": scalar(select(func.count()).select_from(TABLES["libraries"])),
                "runs": scalar(select(func.count()).select_from(R)),
            }
