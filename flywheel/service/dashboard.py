"""The service page's figures (`/ui` and its JSON, `/ui/data`).

`collect` reads every figure `/metrics` also has from the replica's own registry (the very collectors
`/metrics` renders), keyed by its Prometheus sample as the text format prints it, so the page and
`/metrics` agree. The rest comes from the same sources: history from `catalog.activity`, the learner's
supervisor (`learner_state`) and, with tenants, each tenant's usage (`catalog.tenants.ls`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from galahad.flywheel.catalog.db import now
from galahad.flywheel.memory.solver import PATHS

PAGE_GAUGES = ("galahad_verified", "galahad_queue_depth", "galahad_attempts", "galahad_deposited",
               "galahad_problems_failed_total", "galahad_artifacts_evicted", "galahad_artifact_rebuilds_total",
               "galahad_solves_in_flight", "galahad_learner_up", "galahad_learner_restarts_total",
               "galahad_ram_tier_capacity_bytes", "galahad_ram_tier_hits_total", "galahad_ram_tier_misses_total")
HISTORY_POINTS = 48  # points on the verified-problems-over-time axis


def sample_key(name: str, labels: dict[str, str]) -> str:
    """A sample's key as the Prometheus text format prints it: `name` or `name{a="x",b="y"}`."""
    if not labels:
        return name
    esc = {k: str(v).replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"") for k, v in labels.items()}
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in esc.items()) + "}"


def samples(registry) -> dict[str, float]:
    """Every sample a registry yields now (what `/metrics` would print), by `sample_key`."""
    return {sample_key(s.name, s.labels): float(s.value) for family in registry.collect() for s in family.samples}


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.replace(microsecond=0).isoformat() + "Z"


def history(catalog, at: datetime, window_s: int, buckets: int) -> dict[str, Any]:
    """Verified problems at `HISTORY_POINTS` times from the first attempt to `at` (at least a minute), and
    attempts per second in `buckets` intervals over the last `window_s` seconds."""
    first = catalog.activity.first_attempt()
    verified: dict[str, Any] = {"times": [], "values": []}
    if first is not None:
        start = min(first, at - timedelta(seconds=60))
        step = (at - start) / (HISTORY_POINTS - 1)
        times = [start + i * step for i in range(HISTORY_POINTS - 1)] + [at]
        verified = {"times": [_iso(t) for t in times], "values": catalog.activity.verified_by(times)}
    step_s = window_s / buckets
    edges = [at - timedelta(seconds=window_s - i * step_s) for i in range(buckets)] + [at]
    counts = catalog.activity.attempts_between(edges)
    return {"verified": verified,
            "attempts": {"times": [_iso(t) for t in edges[1:]], "bucket_seconds": step_s,
                         "per_second": [c / step_s for c in counts], "window_total": sum(counts)}}


def collect(registry, catalog, learner: dict, tenants_exist: bool, model: str, config) -> dict[str, Any]:
    """Everything the page shows, as JSON (`/ui/data`); `config` is the replica's `ServiceConfig`."""
    at = now()
    every = samples(registry)
    figures = {k: every[k] for k in PAGE_GAUGES if k in every}
    recall = {p: every.get(sample_key("galahad_answers_total", {"path": p}), 0.0) for p in PATHS}
    recall.update({k: v for k, v in _labelled(every, "galahad_answers_total", "path").items() if k not in recall})
    store = _labelled(every, "galahad_store_bytes", "tier")
    tenants = []
    if tenants_exist:
        requests = _tenant_requests(every)
        for row in catalog.tenants.ls():
            tenants.append({"name": row["name"], "revoked": row.get("revoked_at") is not None,
                            "queued": row["queued"], "problems": row["problems"], "used_bytes": row["used_bytes"],
                            "requests": requests.get(row["name"], 0.0),
                            "quotas": {k: row.get(k) for k in ("rpm", "queue", "store_bytes")}})
    latest = [{**r, "verified_at": _iso(r["verified_at"])} for r in catalog.activity.latest_verified(config.ui_latest)]
    return {"now": _iso(at), "model": model, "refresh_seconds": config.ui_refresh_seconds, "figures": figures,
            "recall": recall, "store": store, "learner": learner, "latest": latest, "tenants": tenants,
            **history(catalog, at, config.ui_rate_window_seconds, config.ui_rate_buckets)}


def _labelled(every: dict[str, float], name: str, label: str) -> dict[str, float]:
    """{label value: sample value} of a one-label family, from `samples`' keys."""
    prefix = f'{name}{{{label}="'
    return {k[len(prefix):-2]: v for k, v in every.items() if k.startswith(prefix) and k.endswith('"}')}


def _tenant_requests(every: dict[str, float]) -> dict[str, float]:
    """Requests per tenant: `galahad_tenant_requests_total` summed over endpoint and status."""
    out: dict[str, float] = {}
    prefix = 'galahad_tenant_requests_total{tenant="'
    for k, v in every.items():
        if k.startswith(prefix):
            tenant = k[len(prefix):].split('",', 1)[0]
            out[tenant] = out.get(tenant, 0.0) + v
    return out
