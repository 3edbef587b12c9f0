"""`catalog.gates`: where memory's inexact routes (`transfer`, `similar`) may answer, and the evidence why.

A route answers for a (model, library) only where `eval transfer` measured it beating the base model on the
same held-out problems (`evals/gate_evidence.py`). One row per (model fingerprint, library, route): the
manifest, condition, both counts and whether the gate is open; no row: closed. A later eval replaces the
row, so a route that stops paying closes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Part
from galahad.flywheel.catalog.schema import TABLES

G = TABLES["transfer_gates"]
ROUTES = ("transfer", "similar")
FIELDS = ("model_fingerprint", "library", "route", "open", "manifest_id", "condition", "route_correct", "route_n",
          "base_correct", "base_n")


class Gates(Part):
    def record(self, gates: list[dict[str, Any]]) -> int:
        """Replace the evidence of each (model, library, route) given; returns how many rows were written."""
        if not gates:
            return 0
        stamp = now()
        with self.write() as conn:
            for g in gates:
                if g["route"] not in ROUTES:
                    raise ValueError(f"unknown route {g['route']!r}")
                conn.execute(delete(G).where(G.c.model_fingerprint == g["model_fingerprint"],
                                             G.c.library == g["library"], G.c.route == g["route"]))
                conn.execute(G.insert().values(**{k: g[k] for k in FIELDS}, recorded_at=stamp))
        return len(gates)

    def get(self, model_fingerprint: str, library: str | None, route: str) -> dict[str, Any] | None:
        """The evidence for one (model, library, route), or None (no evidence: the gate is closed)."""
        if not library:
            return None
        return self.read_one(select(G).where(G.c.model_fingerprint == model_fingerprint,
                                             G.c.library == library, G.c.route == route))

    def opened(self, model_fingerprint: str, libraries: list[str]) -> set[tuple[str, str]]:
        """The open (library, route) pairs of `libraries` for the model: one statement (what routing a new
        problem asks of its template's and its topic's libraries)."""
        if not libraries:
            return set()
        with self.engine.connect() as conn:
            return {(r.library, r.route) for r in conn.execute(
                select(G.c.library, G.c.route).where(G.c.model_fingerprint == model_fingerprint,
                                                     G.c.library.in_(libraries), G.c.open.is_(True)))}

    def all(self) -> list[dict[str, Any]]:
        """Every recorded gate, by library, route and model (a few per library an eval measured)."""
        return self.read(select(G).order_by(G.c.library, G.c.route, G.c.model_fingerprint))


def describe(gate: dict[str, Any] | None) -> str:
    """One line for a gate: `open: transfer 5/8 vs base 1/8 (manifest 1a2b3c4d, model 9f8e7d6c)`."""
    if gate is None:
        return "closed: no evidence"
    state = "open" if gate["open"] else "closed"
    return (f"{state}: {gate['route']} {gate['route_correct']}/{gate['route_n']} vs base "
            f"{gate['base_correct']}/{gate['base_n']} (manifest {gate['manifest_id'][:8]}, "
            f"model {gate['model_fingerprint'][:8]})")
