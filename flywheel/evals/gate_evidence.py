"""The evidence that opens a transfer gate, from an `eval transfer` manifest's records (torch-free, SQL-free).

A route (`transfer`, `similar`) pays for a (model, library) when, on the held-out problems it answered for
that library, it was right more often than the base model on the same problems. Records come from the
`--problems FILE` form (its `transfer` condition, else its gated `system` condition; each record names its
`path` and `library`) or from the built-in families (the `library:<scope>:n<k>` condition that grafts what
`solve` grafts). Each is paired with the `base` record of the same problem; a problem memory holds by hash
or key is no evidence. No base condition: no evidence.
"""

from __future__ import annotations

from galahad.flywheel.config import RetrievalPolicy

ROUTES = ("transfer", "similar")
WALKS = ("transfer", "system")  # --problems conditions that walk the routes, preferred in this order


def _pid(r: dict) -> str:
    return r.get("problem_id") or r["id"]


def _route_of(r: dict, library_condition: str) -> tuple[str, str] | None:
    """(route, library) a record measured, or None."""
    if r["condition"] in WALKS:
        return (r["path"], r["library"]) if r.get("path") in ROUTES and r.get("library") else None
    if r["condition"] == library_condition and r.get("library"):
        return ("transfer", r["library"])
    return None


def evidence(records: list[dict], manifest_id: str, model_fingerprint: str,
             max_solutions: int = RetrievalPolicy.max_solutions) -> list[dict]:
    """One gate row per (library, route) measured against base on the same problems: counts, and `open`
    when the route was right on more of them than the base model."""
    base = {_pid(r): bool(r["verified"]) for r in records if r["condition"] == "base"}
    if not base:
        return []
    present = {r["condition"] for r in records}
    walk = next((c for c in WALKS if c in present), None)
    cells: dict[tuple[str, str, str], dict[str, int]] = {}
    for r in records:
        c = r["condition"]
        if c in WALKS and c != walk:
            continue  # the ungated walk's records when both ran
        if not (c in WALKS or (c.startswith("library:") and c.endswith(f":n{max_solutions}"))):
            continue
        found = _route_of(r, c)
        if found is None or _pid(r) not in base or r.get("overlap") in ("hash", "key"):
            continue  # held-out problems only: not one memory holds (a failed recall falls through to transfer)
        cell = cells.setdefault((found[1], found[0], c), {"route_correct": 0, "base_correct": 0, "n": 0})
        cell["route_correct"] += bool(r["verified"])
        cell["base_correct"] += base[_pid(r)]
        cell["n"] += 1
    out: dict[tuple[str, str], dict] = {}
    for (library, route, condition), cell in sorted(cells.items()):
        row = {"model_fingerprint": model_fingerprint, "library": library, "route": route,
               "open": cell["route_correct"] > cell["base_correct"], "manifest_id": manifest_id,
               "condition": condition, "route_correct": cell["route_correct"], "route_n": cell["n"],
               "base_correct": cell["base_correct"], "base_n": cell["n"]}
        seen = out.get((library, route))  # the families' template and topic conditions may name one library
        if seen is None or row["route_n"] > seen["route_n"]:
            out[(library, route)] = row
    return list(out.values())
